import Foundation
import GatewayTesting
import Testing

@testable import AppleClient
@testable import OutboundHTTP
@testable import PolicyModel

@Suite struct ApplePolicyTests {
    static let base = """
        store: memory
        upstreams: { api: { url: "http://127.0.0.1:9000" } }
        routes: [ { match: { path_prefix: / }, upstream: api, mode: off } ]

        """

    static func parse(_ apple: String, keys: AppleTestKeys, environment: String = "production")
        throws(PolicyError) -> GatewayPolicy
    {
        try PolicyLoader.parse(
            "environment: \(environment)\n" + Self.base + apple, sourcePath: keys.directory + "/policies.yaml")
    }

    static func error(_ apple: String, keys: AppleTestKeys, environment: String = "production") -> PolicyError? {
        do {
            _ = try Self.parse(apple, keys: keys, environment: environment)
            return nil
        } catch {
            return error
        }
    }

    @Test func theBlockDecodesWithDefaults() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        #expect(try Self.parse("", keys: keys).apple == nil)
        let policy = try Self.parse(
            """
            apple:
              team_id: ABCDE12345
              key_id: TESTKEY123
              private_key_file: AuthKey_TESTKEY123.p8
            """, keys: keys, environment: "development")
        let apple = try #require(policy.apple)
        #expect(apple.teamID == "ABCDE12345" && apple.keyID == "TESTKEY123")
        #expect(apple.privateKeyFile == keys.p8, "relative to the policy file")
        #expect(apple.environment == .development, "the policy's environment by default")
        #expect(apple.deviceCheckOverride == nil && apple.attestDataOverride == nil && apple.caFile == nil)
        #expect(apple.deviceCheck == AppleDeviceCheckSettings())
        #expect(!apple.fraudRisk.isEnabled && apple.fraudRisk.refresh.refreshInterval == .seconds(86_400))
        #expect(apple.fraudRisk.requestsPerSecond == 10 && apple.fraudRisk.timeout == .seconds(10))
    }

    @Test func everyKeyIsRead() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        try AppleTestKeys.openssl([
            "req", "-x509", "-new", "-key", keys.p8, "-subj", "/CN=ca", "-days", "1", "-out",
            keys.directory + "/ca.pem",
        ])
        let policy = try Self.parse(
            """
            apple:
              team_id: ABCDE12345
              key_id: TESTKEY123
              private_key_file: \(keys.p8)
              environment: development
              devicecheck_url: https://127.0.0.1:8443
              attest_data_url: https://localhost:9443/
              ca_file: ca.pem
              device_check: { timeout: 3s, blocked_bit: bit1 }
              fraud_risk: { enabled: true, refresh_interval: 2d, max_backoff: 14d, requests_per_second: 50, timeout: 20s }
            """, keys: keys, environment: "any")
        let apple = try #require(policy.apple)
        #expect(apple.environment == .development)
        #expect(apple.deviceCheckOverride == OutboundOrigin(host: "127.0.0.1", port: 8443))
        #expect(apple.attestDataOverride == OutboundOrigin(host: "localhost", port: 9443))
        #expect(apple.deviceCheck.timeout == .seconds(3) && apple.deviceCheck.blockedBit == .bit1)
        #expect(apple.fraudRisk.isEnabled && apple.fraudRisk.refresh.refreshInterval == .seconds(2 * 86_400))
        #expect(apple.fraudRisk.refresh.maximumBackoff == .seconds(14 * 86_400))
        #expect(apple.fraudRisk.requestsPerSecond == 50 && apple.fraudRisk.timeout == .seconds(20))
        #expect(apple.caFile == keys.directory + "/ca.pem")
    }

    @Test func errorsNameTheLineAndField() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        try AppleTestKeys.openssl([
            "req", "-x509", "-new", "-key", keys.p8, "-subj", "/CN=ca", "-days", "1", "-out",
            keys.directory + "/ca.pem",
        ])
        let head = "apple:\n  team_id: ABCDE12345\n  key_id: TESTKEY123\n"
        // "apple:" follows environment and the 3 lines of the base; a missing key points at the
        // block (its first key).
        let line = 5
        let cases: [(String, PolicyError.Code, Int, String, String)] = [
            (
                "apple:\n  key_id: TESTKEY123\n  private_key_file: AuthKey_TESTKEY123.p8\n", .missingKey, line + 1,
                "apple.team_id", "production"
            ),
            (head, .missingKey, line + 1, "apple.private_key_file", "production"),
            ("apple:\n  team_id: abcde12345\n", .invalidValue, line + 1, "apple.team_id", "production"),
            (
                head + "  private_key_file: missing.p8\n", .secretUnavailable, line + 3, "apple.private_key_file",
                "production"
            ),
            (
                head + "  private_key_file: sec1.pem\n", .invalidValue, line + 3, "apple.private_key_file",
                "production"
            ),
            (
                head + "  private_key_file: p384.p8\n", .invalidValue, line + 3, "apple.private_key_file",
                "production"
            ),
            (head + "  private_key_file: AuthKey_TESTKEY123.p8\n", .missingKey, line + 1, "apple.environment", "any"),
            (
                head + "  private_key_file: AuthKey_TESTKEY123.p8\n  environment: sandbox\n", .invalidValue, line + 4,
                "apple.environment", "production"
            ),
            (
                head + "  private_key_file: AuthKey_TESTKEY123.p8\n  devicecheck_url: http://x:1\n", .invalidValue,
                line + 4, "apple.devicecheck_url", "production"
            ),
            (
                head + "  private_key_file: AuthKey_TESTKEY123.p8\n  ca_file: public.pem\n", .trustRootNotCertificate,
                line + 4, "apple.ca_file", "production"
            ),
            (
                head + "  private_key_file: AuthKey_TESTKEY123.p8\n  fraud_risk: { refresh_interval: 1h }\n",
                .outOfRange, line + 4, "apple.fraud_risk.refresh_interval", "production"
            ),
            (
                head + "  private_key_file: AuthKey_TESTKEY123.p8\n  fraud_risk: { refresh_intervall: 2d }\n",
                .unknownKey, line + 4, "apple.fraud_risk.refresh_intervall", "production"
            ),
            (
                head + "  private_key_file: AuthKey_TESTKEY123.p8\n  device_check: { blocked_bit: bit2 }\n",
                .invalidValue, line + 4, "apple.device_check.blocked_bit", "production"
            ),
        ]
        for (apple, code, expectedLine, field, environment) in cases {
            let error = try #require(Self.error(apple, keys: keys, environment: environment), "\(field)")
            #expect(error.code == code, "\(field): \(error)")
            #expect(error.line == expectedLine && error.field == field, "line \(error.line): \(error)")
            #expect(error.file.hasSuffix("policies.yaml"))
            #expect(!error.message.contains("MIG"), "no key material in messages")
        }
        #expect(
            try Self.parse(head + "  private_key_file: AuthKey_TESTKEY123.p8\n  ca_file: ca.pem\n", keys: keys).apple?
                .caFile == keys.directory + "/ca.pem")
    }
}
