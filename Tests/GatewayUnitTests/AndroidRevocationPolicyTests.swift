import AppleClient
import Foundation
import GatewayTesting
import GoogleClient
import OutboundHTTP
import Testing

@testable import PolicyModel

/// `android.revocation`: defaults (Google's list), values, `off`, and errors naming line and field.
@Suite struct AndroidRevocationPolicyTests {
    static func block(_ revocation: String) -> String {
        """
        android:
          apps:
            - { package: com.example.app, signing_digests: ["\(AndroidPolicyTests.digestHex)"] }
        \(revocation)
        """
    }

    static func parse(_ revocation: String, warnings: inout [PolicyWarning]) throws -> AndroidRevocationSettings? {
        let policy = try PolicyLoader.parse(
            AndroidPolicyTests.policy(Self.block(revocation)), sourcePath: "p.yaml", warnings: &warnings)
        return try #require(policy.android).revocation
    }

    @Test func absentMeansGooglesListWithTheDefaults() throws {
        var warnings: [PolicyWarning] = []
        let settings = try #require(try Self.parse("", warnings: &warnings))
        #expect(
            settings.source == .url(OutboundHTTPEndpoint(host: "android.googleapis.com", path: "/attestation/status")))
        #expect(settings == .google)
        #expect(settings.refresh == .seconds(3600))
        #expect(settings.maximumAge == .seconds(86_400))
        #expect(settings.timeout == .seconds(30))
        #expect(settings.onStale == .refuse)
        #expect(settings.caFile == nil)
        #expect(warnings.filter { $0.code.hasPrefix("android_revocation") }.isEmpty)
    }

    @Test func everyKeyDecodes() throws {
        let directory = try TemporaryDirectory()
        try "x".write(toFile: directory.path + "/ca.pem", atomically: true, encoding: .utf8)
        let yaml = AndroidPolicyTests.policy(
            Self.block(
                """
                  revocation:
                    url: https://127.0.0.1:8443/attestation/status
                    ca_file: ca.pem
                    refresh: 10m
                    max_age: 72h
                    timeout: 5s
                    on_stale: allow
                """))
        try yaml.write(toFile: directory.path + "/p.yaml", atomically: true, encoding: .utf8)
        var warnings: [PolicyWarning] = []
        let policy = try PolicyLoader.load(path: directory.path + "/p.yaml", warnings: &warnings)
        let settings = try #require(policy.android?.revocation)
        #expect(
            settings.source == .url(OutboundHTTPEndpoint(host: "127.0.0.1", port: 8443, path: "/attestation/status")))
        #expect(settings.caFile == directory.path + "/ca.pem")
        #expect(settings.refresh == .seconds(600))
        #expect(settings.maximumAge == .seconds(72 * 3600))
        #expect(settings.timeout == .seconds(5))
        #expect(settings.onStale == .allow)
        let warning = try #require(warnings.first { $0.code == "android_revocation_on_stale_allow" })
        #expect(warning.field == "android.revocation")
    }

    @Test func aFileSourceIsResolvedAgainstThePolicy() throws {
        let directory = try TemporaryDirectory()
        try #"{"entries":{}}"#.write(toFile: directory.path + "/status.json", atomically: true, encoding: .utf8)
        let yaml = AndroidPolicyTests.policy(Self.block("  revocation: { file: status.json, max_age: 48h }"))
        try yaml.write(toFile: directory.path + "/p.yaml", atomically: true, encoding: .utf8)
        let policy = try PolicyLoader.load(path: directory.path + "/p.yaml")
        let settings = try #require(policy.android?.revocation)
        #expect(settings.source == .file(directory.path + "/status.json"))
        #expect(settings.maximumAge == .seconds(48 * 3600))
    }

    @Test func offTurnsTheCheckOffAndIsWarnedAbout() throws {
        var warnings: [PolicyWarning] = []
        #expect(try Self.parse("  revocation: off", warnings: &warnings) == nil)
        let warning = try #require(warnings.first { $0.code == "android_revocation_off" })
        #expect(warning.field == "android.revocation")
        #expect(warning.line > 0)
    }

    @Test func badValuesNameLineAndField() throws {
        let cases: [(String, PolicyError.Code, String)] = [
            ("  revocation: on", .invalidValue, "android.revocation"),
            ("  revocation: { urls: x }", .unknownKey, "android.revocation.urls"),
            ("  revocation: { url: http://example.com/status }", .invalidValue, "android.revocation.url"),
            ("  revocation: { url: https://example.com }", .invalidValue, "android.revocation.url"),
            (
                "  revocation: { url: https://a.example/s, file: /etc/hostname }", .conflictingKeys,
                "android.revocation.file"
            ),
            ("  revocation: { refresh: 0s }", .invalidDuration, "android.revocation.refresh"),
            ("  revocation: { refresh: 25h }", .outOfRange, "android.revocation.refresh"),
            ("  revocation: { max_age: 30s }", .outOfRange, "android.revocation.max_age"),
            ("  revocation: { max_age: 200h }", .outOfRange, "android.revocation.max_age"),
            ("  revocation: { refresh: 2h, max_age: 1h }", .invalidValue, "android.revocation.max_age"),
            ("  revocation: { timeout: 10m }", .outOfRange, "android.revocation.timeout"),
            ("  revocation: { on_stale: ignore }", .invalidValue, "android.revocation.on_stale"),
            ("  revocation: { file: /nonexistent/status.json }", .tlsFileUnreadable, "android.revocation.file"),
            (
                "  revocation: { file: /etc/hostname, ca_file: /etc/hostname }", .conflictingKeys,
                "android.revocation.ca_file"
            ),
        ]
        for (revocation, code, field) in cases {
            var warnings: [PolicyWarning] = []
            do {
                _ = try Self.parse(revocation, warnings: &warnings)
                Issue.record("accepted: \(revocation)")
            } catch let error as PolicyError {
                #expect(error.code == code, "\(revocation): \(error)")
                #expect(error.field == field, "\(revocation): \(error)")
                #expect(error.file == "p.yaml")
                #expect(error.line > 0, "\(revocation)")
            }
        }
    }

    @Test func googlesURLParses() {
        #expect(
            OutboundHTTPEndpoint(url: AndroidRevocationSettings.googleURL)?.description
                == AndroidRevocationSettings.googleURL)
    }
}
