import Foundation
import GatewayTesting
import Testing
import Verification

@testable import Enforcement
@testable import GateContract
@testable import GatewayIO
@testable import GatewayServe
@testable import HTTP1
@testable import KeyStore
@testable import PolicyModel

/// `X-App-Attest-Signature`: the canonical string, HMAC and ES256 signing, the policy block, the
/// gate signing every forward, and the proxy delivering it to a real upstream.
@Suite(.serialized) struct IdentitySignatureTests {
    static let secret = Array("0123456789abcdef0123456789abcdef".utf8)
    static let hmacSigner = IdentitySigner(kid: "k1", key: .hmacSHA256(Self.secret))

    static func verifiedHead(extra: [(String, String)] = []) -> HTTPRequestHead {
        request(
            "GET", "/v1/items?a=1",
            headers: [
                ("X-App-Attest-Status", "verified"), ("X-App-Attest-Counter", "7"),
                ("X-App-Attest-App-Id", "ABCDE12345.com.example.app"),
            ] + extra)
    }

    /// The fields of a signature header value (`t=…, kid=…, alg=…, sig=…`).
    static func parameters(_ value: String) -> [String: String] {
        var out: [String: String] = [:]
        for part in value.split(separator: ",") {
            let pair = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if pair.count == 2 { out[String(pair[0])] = String(pair[1]) }
        }
        return out
    }

    static func decodeBase64URL(_ text: String) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64).map { [UInt8]($0) }
    }

    // MARK: - Canonical string and signing

    @Test func canonicalStringIsExactlyTheDocumentedLines() {
        let head = Self.verifiedHead(extra: [("Content-Type", "text/plain")])
        let text = IdentitySigner.canonicalString(head, timestamp: 1_700_000_000, algorithm: .hmacSHA256, kid: "k1")
        #expect(
            String(decoding: text, as: UTF8.self)
                == "attest-gateway-signature-v1\n1700000000\nhmac-sha256\nk1\nGET\n/v1/items?a=1\n"
                + "x-app-attest-app-id:ABCDE12345.com.example.app\nx-app-attest-counter:7\nx-app-attest-status:verified\n"
        )
    }

    @Test func hmacKnownAnswer() throws {
        // Computed independently: python3 hmac.new(secret, canonical, sha256), base64url.
        let signed = try Self.hmacSigner.signed(Self.verifiedHead(), timestamp: 1_700_000_000)
        #expect(
            signed.headers[IdentitySigner.headerName]
                == "t=1700000000, kid=k1, alg=hmac-sha256, sig=0MZ3iZujN4s7HNJYvkCGsAploQa7iJpGSu0F1x2I7fk")
    }

    @Test func everyCoveredPartChangesTheSignature() throws {
        let base = try Self.hmacSigner.signed(Self.verifiedHead(), timestamp: 1_700_000_000)
        var variants: [HTTPRequestHead] = []
        var head = Self.verifiedHead()
        head.method = "POST"
        variants.append(head)
        head = Self.verifiedHead()
        head.target = "/v1/items?a=2"
        variants.append(head)
        head = Self.verifiedHead()
        head.headers.removeAll { $0.name == "X-App-Attest-Counter" }
        head.headers.add(name: "X-App-Attest-Counter", value: "8")
        variants.append(head)
        variants.append(Self.verifiedHead(extra: [("X-App-Attest-Rollout-Arm", "monitor")]))
        let baseValue = base.headers[IdentitySigner.headerName]
        for variant in variants {
            let other = try Self.hmacSigner.signed(variant, timestamp: 1_700_000_000)
            #expect(other.headers[IdentitySigner.headerName] != baseValue)
        }
        let later = try Self.hmacSigner.signed(Self.verifiedHead(), timestamp: 1_700_000_001)
        #expect(
            Self.parameters(later.headers[IdentitySigner.headerName] ?? "")["sig"]
                != Self.parameters(baseValue ?? "")["sig"])
        // Headers outside X-App-Attest-* are not covered (proxies between may rewrite them).
        let unrelated = try Self.hmacSigner.signed(
            Self.verifiedHead(extra: [("Accept", "*/*")]), timestamp: 1_700_000_000)
        #expect(unrelated.headers[IdentitySigner.headerName] == baseValue)
    }

    @Test func namesAreLoweredSortedAndValuesWrittenAsOnTheWire() {
        let head = request(
            "GET", "/x",
            headers: [
                ("X-APP-ATTEST-STATUS", "failed; reason=x"), ("x-app-attest-debug-token-name", " a\r\nb "),
                ("X-App-Attest-Signature", "t=1, kid=old, alg=hmac-sha256, sig=AAAA"),
            ])
        let text = String(
            decoding: IdentitySigner.canonicalString(head, timestamp: 5, algorithm: .es256, kid: "e"), as: UTF8.self)
        #expect(
            text
                == "attest-gateway-signature-v1\n5\nes256\ne\nGET\n/x\nx-app-attest-debug-token-name:a  b\nx-app-attest-status:failed; reason=x\n"
        )
    }

    @Test func es256SignatureVerifiesWithThePublicKeyOnly() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        let key = try IdentitySigningKey.load(algorithm: .es256, path: keys.p8).get()
        let signer = IdentitySigner(kid: "e1", key: key)
        let signed = try signer.signed(Self.verifiedHead(), timestamp: 1_700_000_000)
        let value = try #require(signed.headers[IdentitySigner.headerName])
        let parameters = Self.parameters(value)
        #expect(parameters["alg"] == "es256" && parameters["kid"] == "e1" && parameters["t"] == "1700000000")
        let sig = try #require(parameters["sig"])
        let rs = try #require(Self.decodeBase64URL(sig))
        #expect(rs.count == 64)
        let der = try #require(ECDSASignatureEncoding.der(fromRS: rs))
        let publicKey = try ECPublicKey(pem: try keys.read(keys.publicPEM))
        let message = IdentitySigner.canonicalString(
            Self.verifiedHead(), timestamp: 1_700_000_000, algorithm: .es256, kid: "e1")
        #expect(publicKey.isValidSignature(der, for: message))
        var tampered = message
        tampered[tampered.count - 2] ^= 1
        #expect(!publicKey.isValidSignature(der, for: tampered))
    }

    @Test func keyFilesAreCheckedForTheirAlgorithm() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        let short = keys.directory + "/short"
        try "  too-short-secret\n".write(toFile: short, atomically: true, encoding: .utf8)
        let good = keys.directory + "/good"
        try "\(String(decoding: Self.secret, as: UTF8.self))\n".write(toFile: good, atomically: true, encoding: .utf8)
        guard case .success(.hmacSHA256(let secret)) = IdentitySigningKey.load(algorithm: .hmacSHA256, path: good)
        else {
            Issue.record("a 32-byte secret with a trailing newline loads")
            return
        }
        #expect(secret == Self.secret, "surrounding whitespace is not part of the secret")
        #expect(IdentitySigningKey.load(algorithm: .hmacSHA256, path: short).failure?.code == "signing_key_too_short")
        #expect(IdentitySigningKey.load(algorithm: .es256, path: good).failure?.code == "signing_key_not_p256")
        #expect(IdentitySigningKey.load(algorithm: .es256, path: keys.p384).failure?.code == "signing_key_not_p256")
        #expect(
            IdentitySigningKey.load(algorithm: .hmacSHA256, path: keys.directory + "/absent").failure?.code
                == "signing_key_unreadable")
        // The secret never appears in a message.
        let problem = IdentitySigningKey.load(algorithm: .es256, path: good).failure
        #expect(problem.map { !$0.description.contains("0123456789abcdef") } == true)
    }

    /// A micro-benchmark with a loose bound (the figures are in docs/design-notes.md): signing
    /// must stay far below the cost of the verification it follows.
    @Test func signingCostsMicroseconds() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        let es256 = IdentitySigner(kid: "e1", key: try IdentitySigningKey.load(algorithm: .es256, path: keys.p8).get())
        let head = Self.verifiedHead(extra: [("X-App-Attest-Key-Id", String(repeating: "A", count: 44))])
        let clock = ContinuousClock()
        func perSign(_ signer: IdentitySigner, _ count: Int) throws -> Duration {
            let elapsed = try clock.measure {
                for i in 0..<count { _ = try signer.signed(head, timestamp: 1_700_000_000 + Int64(i)) }
            }
            return elapsed / count
        }
        let hmac = try perSign(Self.hmacSigner, 20_000)
        let ecdsa = try perSign(es256, 2_000)
        print("identity signature per request: hmac-sha256 \(hmac), es256 \(ecdsa)")
        #expect(hmac < .milliseconds(2) && ecdsa < .milliseconds(5), "debug builds are ~100x slower than release")
    }

    // MARK: - Policy

    static let base = """
        store: memory
        upstreams: { api: { url: "http://127.0.0.1:9000" } }
        routes: [ { match: { path_prefix: / }, upstream: api, mode: off } ]

        """

    /// A directory holding `k1` and `k2` (HMAC secrets) and `e1.pem` (ES256).
    static func keyDirectory() throws -> AppleTestKeys {
        let keys = try AppleTestKeys()
        try "first-secret-of-at-least-32-bytes!!".write(
            toFile: keys.directory + "/k1", atomically: true, encoding: .utf8)
        try "second-secret-of-at-least-32-bytes!".write(
            toFile: keys.directory + "/k2", atomically: true, encoding: .utf8)
        return keys
    }

    static func parse(_ block: String, keys: AppleTestKeys) throws(PolicyError) -> GatewayPolicy {
        try PolicyLoader.parse(Self.base + block, sourcePath: keys.directory + "/policies.yaml")
    }

    static func error(_ block: String, keys: AppleTestKeys) -> PolicyError? {
        do {
            _ = try Self.parse(block, keys: keys)
            return nil
        } catch {
            return error
        }
    }

    @Test func theBlockDecodes() throws {
        let keys = try Self.keyDirectory()
        defer { keys.remove() }
        #expect(try Self.parse("", keys: keys).identitySignature == nil)
        let policy = try Self.parse(
            """
            identity_signature:
              algorithm: hmac-sha256
              active_kid: k2
              keys:
                - {kid: k1, key_file: k1}
                - {kid: k2, key_file: \(keys.directory)/k2}
            """, keys: keys)
        let configuration = try #require(policy.identitySignature)
        #expect(configuration.algorithm == .hmacSHA256 && configuration.activeKID == "k2")
        #expect(configuration.keys.map(\.kid) == ["k1", "k2"])
        #expect(configuration.keys[0].keyFile == keys.directory + "/k1", "relative to the policy file")
        let signer = try IdentitySigner.load(configuration).get()
        #expect(signer.kid == "k2" && signer.algorithm == .hmacSHA256)
        let summary = PolicySummary.render(policy)
        #expect(summary.contains("identity_signature    algorithm=hmac-sha256 active_kid=k2"))
        #expect(!summary.contains("second-secret"), "the summary names files, never secrets")

        let es = try Self.parse(
            "identity_signature: {algorithm: es256, active_kid: e1, keys: [{kid: e1, key_file: \(keys.p8)}]}",
            keys: keys)
        #expect(es.identitySignature?.algorithm == .es256)
    }

    @Test func mistakesNameTheLineAndField() throws {
        let keys = try Self.keyDirectory()
        defer { keys.remove() }
        let cases: [(block: String, code: PolicyError.Code, line: Int, field: String)] = [
            (
                "identity_signature:\n  algorithm: hmac-sha512\n  active_kid: k1\n  keys: [{kid: k1, key_file: k1}]",
                .invalidValue, 5, "identity_signature.algorithm"
            ),
            (
                "identity_signature:\n  algorithm: hmac-sha256\n  active_kid: k9\n  keys: [{kid: k1, key_file: k1}]",
                .unknownSigningKey, 6, "identity_signature.active_kid"
            ),
            (
                "identity_signature:\n  algorithm: hmac-sha256\n  active_kid: k1\n  keys: [{kid: k1, key_file: missing}]",
                .signingKeyInvalid, 7, "identity_signature.keys[0].key_file"
            ),
            (
                "identity_signature:\n  algorithm: es256\n  active_kid: k1\n  keys: [{kid: k1, key_file: k1}]",
                .signingKeyInvalid, 7, "identity_signature.keys[0].key_file"
            ),
            (
                "identity_signature:\n  algorithm: hmac-sha256\n  active_kid: k1\n  keys: [{kid: 'k 1', key_file: k1}]",
                .invalidValue, 7, "identity_signature.keys[0].kid"
            ),
            (
                "identity_signature:\n  algorithm: hmac-sha256\n  active_kid: k1\n  keys: [{kid: k1, key_file: k1}, {kid: k1, key_file: k2}]",
                .invalidValue, 7, "identity_signature.keys[1].kid"
            ),
            ("identity_signature:\n  algorithm: hmac-sha256\n  keys: [{kid: k1, key_file: k1}]", .missingKey, 0, ""),
            ("identity_signature:\n  algorithm: hmac-sha256\n  active_kid: k1\n  keys: []", .outOfRange, 7, ""),
            ("identity_signature:\n  algoritm: hmac-sha256", .unknownKey, 5, ""),
        ]
        for item in cases {
            let error = try #require(Self.error(item.block, keys: keys), "\(item.block)")
            #expect(error.code == item.code, "\(item.block): \(error)")
            if item.line > 0 { #expect(error.line == item.line, "\(error)") }
            if !item.field.isEmpty { #expect(error.field == item.field, "\(error)") }
            #expect(error.description.hasPrefix(keys.directory + "/policies.yaml:"), "\(error)")
        }
    }

    // MARK: - The gate and the proxy

    static func gate(signer: IdentitySigner?, now: Date = Date(timeIntervalSince1970: 1_700_000_000)) throws
        -> AttestGate
    {
        try AttestGate(
            policy: EnforcementHarness.policy(), store: MemoryStore(), identitySigner: signer, now: { now })
    }

    @Test func theGateSignsForwardsAndReplacesAClientSentSignature() async throws {
        #expect(IdentityHeaders.isReserved("x-app-attest-signature"))
        let gate = try Self.gate(signer: Self.hmacSigner)
        let forged = "t=1700000000, kid=k1, alg=hmac-sha256, sig=AAAA"
        let head = request(
            "GET", "/public/logo.png",
            headers: [("X-App-Attest-Signature", forged), ("X-App-Attest-Status", "verified")])
        let forwarded = try #require(await runGate(gate, head).1.forwardedHead)
        #expect(forwarded.headers.values(for: "X-App-Attest-Signature").count == 1)
        let value = try #require(forwarded.headers[IdentitySigner.headerName])
        #expect(value != forged)
        let parameters = Self.parameters(value)
        #expect(parameters["t"] == "1700000000")
        let expected = HMACSHA256.authenticationCode(
            key: Self.secret,
            message: IdentitySigner.canonicalString(
                forwarded, timestamp: 1_700_000_000, algorithm: .hmacSHA256, kid: "k1"))
        #expect(Self.decodeBase64URL(parameters["sig"] ?? "") == expected)
        #expect(
            String(
                decoding: IdentitySigner.canonicalString(forwarded, timestamp: 1, algorithm: .hmacSHA256, kid: "k1"),
                as: UTF8.self
            ).hasSuffix("\nx-app-attest-status:skipped\n"))

        // Failures forwarded in monitor mode are signed too: the upstream must trust the status.
        let monitored = request("GET", "/v1/watch/x")
        let flagged = try #require(await runGate(gate, monitored).1.forwardedHead)
        #expect(flagged.headers["X-App-Attest-Status"]?.hasPrefix("failed") == true)
        #expect(flagged.headers[IdentitySigner.headerName] != nil)

        // Local answers are not signed; without a signer nothing is added.
        let local = await runGate(gate, request("GET", "/nowhere")).1
        #expect(local.localResponse?.headers[IdentitySigner.headerName] == nil)
        let unsigned = try #require(await runGate(try Self.gate(signer: nil), head).1.forwardedHead)
        #expect(!unsigned.headers.contains(IdentitySigner.headerName))
    }

    @Test func theUpstreamReceivesAValidSignatureAndNoClientCopy() throws {
        let upstream = try UpstreamProcess()
        let gate = try Self.gate(signer: Self.hmacSigner, now: Date())
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], gate: gate)
        defer { gateway.stop() }
        let response = try TestHTTPClient.request(
            port: gateway.port,
            "GET /public/a?b=1 HTTP/1.1\r\nHost: t\r\nX-App-Attest-Signature: t=1, kid=k1, alg=hmac-sha256, sig=AAAA\r\n\r\n"
        )
        #expect(response.status == 200)
        let echo = try response.json()
        let pairs = try #require(echo["headers"] as? [[String]])
        let signatures = pairs.filter { $0[0].lowercased() == "x-app-attest-signature" }
        #expect(signatures.count == 1)
        // Rebuild what the upstream saw and check it the way docs/identity-signature.md does.
        let method = try #require(echo["method"] as? String)
        let target = try #require(echo["target"] as? String)
        let received = HTTPRequestHead(
            method: method, target: target, headers: HTTPHeaders(pairs.map { ($0[0], $0[1]) }))
        let parameters = Self.parameters(signatures[0][1])
        let timestamp = try #require(Int64(parameters["t"] ?? ""))
        #expect(abs(timestamp - Int64(Date().timeIntervalSince1970)) < 60)
        let expected = HMACSHA256.authenticationCode(
            key: Self.secret,
            message: IdentitySigner.canonicalString(
                received, timestamp: timestamp, algorithm: .hmacSHA256, kid: "k1"))
        #expect(Self.decodeBase64URL(parameters["sig"] ?? "") == expected)
        #expect(received.target == "/public/a?b=1")
    }

    @Test func aBadKeyFileFailsTheGateBuildSoAReloadKeepsTheRunningPolicy() throws {
        let keys = try Self.keyDirectory()
        defer { keys.remove() }
        let policy = try Self.parse(
            "identity_signature: {algorithm: hmac-sha256, active_kid: k1, keys: [{kid: k1, key_file: k1}]}",
            keys: keys)
        let factory = EnforcementGateFactory(registry: MetricsRegistry())
        _ = try factory.makeGates(for: policy)
        // The file is swapped for a bad one after the policy was read.
        try "short".write(toFile: keys.directory + "/k1", atomically: true, encoding: .utf8)
        #expect(throws: EnforcementGateFactory.BuildError.self) { try factory.makeGates(for: policy) }
    }
}
