import Foundation
import Testing

@testable import HTTP1
@testable import GateContract
@testable import HTTPProxy
@testable import PolicyModel

/// `access_log.key_id`: prefix, full, hashed (keyed, so lines join but cannot be reversed) or
/// omitted; decoded with its file checks, applied to real access-log lines, swapped by a reload.
@Suite struct AccessLogKeyIDTests {
    static let keyID = "ZmFrZS1rZXktaWQtZm9yLXRoZS1sb2c="
    static let hashKey = Array("log-key-for-the-tests-32-bytes!!".utf8)

    static let base = """
        listen: 127.0.0.1:8080
        store: memory
        upstreams:
          api: { url: "http://127.0.0.1:9000" }
        routes:
          - { name: public, match: { path_prefix: / }, upstream: api, mode: "off" }

        """

    @Test func eachModeWritesWhatItPromises() {
        #expect(AccessLogKeyIDFormat.prefix.render(Self.keyID) == "ZmFrZS1r")
        #expect(AccessLogKeyIDFormat.prefix.render(nil) == nil)
        let full = try? AccessLogKeyIDFormat.load(AccessLogPolicy(keyID: .full)).get()
        #expect(full?.render(Self.keyID) == Self.keyID)
        let omitted = try? AccessLogKeyIDFormat.load(AccessLogPolicy(keyID: .omitted)).get()
        #expect(omitted?.render(Self.keyID) == nil)
    }

    @Test func hashedIsTheTruncatedHMACAndJoinsButDoesNotReveal() {
        let hashed = AccessLogKeyIDFormat.hashed(key: Self.hashKey)
        // Python: hmac.new(key, key_id, sha256).hexdigest()[:32]
        #expect(hashed.render(Self.keyID) == "h:b98f872e70e2a671d96fada37bbf3fb2")
        #expect(hashed.render("c2Vjb25kLWtleQ==") == "h:34c8b5b41d924ebdfa5dfdf10156f64d")
        #expect(hashed.render(Self.keyID) == hashed.render(Self.keyID), "one key, one value: lines join")
        let otherKey = AccessLogKeyIDFormat.hashed(key: Array("another-log-key-of-32-bytes-long".utf8))
        #expect(otherKey.render(Self.keyID) != hashed.render(Self.keyID), "without the key, no match")
        #expect(hashed.render(Self.keyID)?.contains("ZmFrZS1r") == false)
        #expect(hashed.render(nil) == nil)
    }

    @Test func theBlockDecodesAndTheSummaryNamesOnlyTheFile() throws {
        let directory = try TemporaryDirectory()
        let keyFile = directory.path + "/log-key"
        try Data(Self.hashKey).write(to: URL(fileURLWithPath: keyFile))
        #expect(
            try PolicyLoader.parse(Self.base, sourcePath: directory.path + "/p.yaml").accessLog == AccessLogPolicy())
        let policy = try PolicyLoader.parse(
            Self.base + "access_log: { key_id: hashed, key_id_hash_key_file: log-key }",
            sourcePath: directory.path + "/p.yaml")
        #expect(policy.accessLog == AccessLogPolicy(keyID: .hashed, hashKeyFile: keyFile), "relative to the policy")
        let format = try AccessLogKeyIDFormat.load(policy.accessLog).get()
        #expect(format.render(Self.keyID) == "h:b98f872e70e2a671d96fada37bbf3fb2")
        let summary = PolicySummary.render(policy)
        #expect(summary.contains("access_log            key_id=hashed key_id_hash_key_file=\(keyFile)"))
        #expect(!summary.contains("log-key-for-the-tests"), "the key never leaves the file")
        let full = try PolicyLoader.parse(Self.base + "access_log: { key_id: full }", sourcePath: "/p.yaml")
        #expect(full.accessLog.keyID == .full)
    }

    @Test func mistakesNameTheLineAndField() throws {
        let directory = try TemporaryDirectory()
        try "short".write(toFile: directory.path + "/short", atomically: true, encoding: .utf8)
        try Data(Self.hashKey).write(to: URL(fileURLWithPath: directory.path + "/good"))
        let cases: [(String, PolicyError.Code, String)] = [
            ("access_log: { key_id: sha1 }", .invalidValue, "access_log.key_id"),
            ("access_log: { key_id: hashed }", .missingKey, "access_log.key_id_hash_key_file"),
            (
                "access_log: { key_id: hashed, key_id_hash_key_file: short }", .secretUnavailable,
                "access_log.key_id_hash_key_file"
            ),
            (
                "access_log: { key_id: hashed, key_id_hash_key_file: absent }", .secretUnavailable,
                "access_log.key_id_hash_key_file"
            ),
            (
                "access_log: { key_id: full, key_id_hash_key_file: good }", .conflictingKeys,
                "access_log.key_id_hash_key_file"
            ),
            ("access_log: { keyid: full }", .unknownKey, "access_log.keyid"),
        ]
        for (block, code, field) in cases {
            do {
                _ = try PolicyLoader.parse(Self.base + block, sourcePath: directory.path + "/p.yaml")
                Issue.record("accepted: \(block)")
            } catch {
                #expect(error.code == code, "\(block)")
                #expect(error.field == field, "\(block)")
                #expect(error.line == 7, "\(block)")
                #expect(!error.description.contains("log-key-for-the-tests"))
            }
        }
    }

    /// Real lines from a running server: the format in force is the one last installed.
    @Test func accessLogLinesFollowTheInstalledFormat() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], gate: KeyIDTestGate(keyID: Self.keyID), loops: 1,
            accessLog: true)
        defer { gateway.stop() }
        func keyIDLogged(after count: Int) throws -> Any? {
            _ = try TestHTTPClient.request(port: gateway.port, "GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
            var lines: [String] = []
            let deadline = ContinuousClock.now + .seconds(5)
            while lines.count <= count, ContinuousClock.now < deadline {
                lines = gateway.accessLogLines()
                usleep(20_000)
            }
            let line = try #require(lines.count > count ? lines[count] : nil)
            let entry = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return entry["key_id"]
        }
        #expect(try keyIDLogged(after: 0) as? String == "ZmFrZS1r", "prefix by default")
        gateway.server.update { $0.accessLogKeyID = .hashed(key: Self.hashKey) }
        #expect(try keyIDLogged(after: 1) as? String == "h:b98f872e70e2a671d96fada37bbf3fb2")
        let full = try AccessLogKeyIDFormat.load(AccessLogPolicy(keyID: .full)).get()
        gateway.server.update { $0.accessLogKeyID = full }
        #expect(try keyIDLogged(after: 2) as? String == Self.keyID)
        let omitted = try AccessLogKeyIDFormat.load(AccessLogPolicy(keyID: .omitted)).get()
        gateway.server.update { $0.accessLogKeyID = omitted }
        #expect(try keyIDLogged(after: 3) is NSNull)
    }
}

/// Forwards every request, naming `keyID` as the request's key (what the attest gate does).
struct KeyIDTestGate: RequestGate {
    let keyID: String

    func classify(_ head: HTTPRequestHead, client: String) -> GateClassification {
        GateClassification(routeName: "keyed", upstream: "api", bufferBodyUpTo: nil)
    }

    func decide(
        _ head: HTTPRequestHead, body: [UInt8]?, classification: GateClassification,
        completion: @escaping @Sendable (GateDecision) -> Void
    ) {
        completion(.forward(head, GateLogInfo(verdict: .verified, keyID: self.keyID)))
    }
}
