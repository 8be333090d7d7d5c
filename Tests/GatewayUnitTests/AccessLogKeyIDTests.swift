import Foundation
import GatewayTesting
import Testing

@testable import GateContract
@testable import HTTP1
@testable import HTTPProxy
@testable import PolicyModel

/// `access_log.key_id`: prefix, full, hashed (keyed, so lines join but cannot be reversed) or
/// omitted; decoded with its file checks (on real access-log lines: `AccessLogKeyIDIntegrationTests`).
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
}
