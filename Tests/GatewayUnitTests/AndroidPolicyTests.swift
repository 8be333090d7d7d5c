import Foundation
import GatewayTesting
import Testing

@testable import PolicyModel

/// `android:` and `routes[i].platforms`: values, defaults, and errors naming line and field.
@Suite struct AndroidPolicyTests {
    static let digestHex = String(repeating: "AB", count: 32)

    static func policy(_ android: String, routes: String? = nil, appIDs: Bool = true) -> String {
        """
        store: memory
        \(appIDs ? #"app_ids: ["ABCDE12345.com.example.app"]"# : "")
        upstreams:
          api: { url: "http://127.0.0.1:9000" }
        routes:
        \(routes ?? "  - match: { path_prefix: / }\n    upstream: api")
        \(android)
        """
    }

    static let goodBlock = """
        android:
          apps:
            - package: com.example.app
              signing_digests: ["\(digestHex)", "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s="]
              security_level: strongbox
              require_verified_boot: false
              min_patch_level: 202601
        """

    @Test func appsDecodeWithDefaults() throws {
        let policy = try PolicyLoader.parse(Self.policy(Self.goodBlock), sourcePath: "p.yaml")
        let android = try #require(policy.android)
        #expect(android.apps.count == 1)
        let app = android.apps[0]
        #expect(app.packageName == "com.example.app")
        // Hex and base64 of the same 32 bytes collapse to one digest.
        #expect(app.signingDigests == [[UInt8](repeating: 0xab, count: 32)])
        #expect(app.securityLevel == .strongbox)
        #expect(app.requireLockedBootloader)
        #expect(!app.requireVerifiedBoot)
        #expect(app.minimumPatchLevel == 202_601)
        #expect(policy.routes[0].platforms == [.ios, .android])
    }

    @Test func colonSeparatedDigestsAreAccepted() throws {
        let colons = stride(from: 0, to: 64, by: 2).map { _ in "0F" }.joined(separator: ":")
        let block = """
            android:
              apps:
                - { package: com.example.app, signing_digests: ["\(colons)"] }
            """
        let policy = try PolicyLoader.parse(Self.policy(block), sourcePath: "p.yaml")
        #expect(policy.android?.apps[0].signingDigests == [[UInt8](repeating: 0x0f, count: 32)])
        #expect(policy.android?.apps[0].securityLevel == .trustedEnvironment)
    }

    @Test func androidOnlyPolicyMayEnforce() throws {
        let block = """
            android:
              apps:
                - { package: com.example.app, signing_digests: ["\(Self.digestHex)"] }
            """
        let routes = "  - match: { path_prefix: / }\n    upstream: api\n    platforms: [android]"
        let policy = try PolicyLoader.parse(Self.policy(block, routes: routes, appIDs: false), sourcePath: "p.yaml")
        #expect(policy.routes[0].mode == .enforce)
        #expect(policy.routes[0].platforms == [.android])
    }

    @Test func errorsNameTheField() {
        let cases: [(String, String?, PolicyError.Code, String)] = [
            ("android:\n  apps: []", nil, .invalidValue, "android.apps"),
            (
                "android:\n  apps:\n    - { package: example, signing_digests: [\"\(Self.digestHex)\"] }", nil,
                .invalidValue, "android.apps[0].package"
            ),
            (
                "android:\n  apps:\n    - { package: com.example.app, signing_digests: [\"abc\"] }", nil, .invalidValue,
                "android.apps[0].signing_digests[0]"
            ),
            (
                "android:\n  apps:\n    - { package: com.example.app }", nil, .missingKey,
                "android.apps[0].signing_digests"
            ),
            (
                "android:\n  apps:\n    - { package: com.example.app, signing_digests: [\"\(Self.digestHex)\"], security_level: tee }",
                nil, .invalidValue, "android.apps[0].security_level"
            ),
            (
                "android:\n  apps:\n    - { package: com.example.app, signing_digests: [\"\(Self.digestHex)\"], min_patch_level: 202613 }",
                nil, .invalidValue, "android.apps[0].min_patch_level"
            ),
            ("android:\n  aps: []", nil, .unknownKey, "android.aps"),
            // A route may not name a platform the policy does not configure.
            (
                "", "  - match: { path_prefix: / }\n    upstream: api\n    platforms: [android]", .invalidValue,
                "routes[0].platforms[0]"
            ),
        ]
        for (block, routes, code, field) in cases {
            do {
                _ = try PolicyLoader.parse(Self.policy(block, routes: routes), sourcePath: "p.yaml")
                Issue.record("accepted: \(block)")
            } catch {
                #expect(error.code == code, "\(block): \(error)")
                #expect(error.field == field, "\(block): \(error)")
                #expect(error.file == "p.yaml")
                #expect(error.line > 0)
            }
        }
    }

    @Test func trustAnchorsAreReadAndCheckedRelativeToThePolicy() throws {
        let directory = try TemporaryDirectory()
        try "not a certificate".write(toFile: directory.path + "/bad.pem", atomically: true, encoding: .utf8)
        let block = """
            android:
              apps:
                - { package: com.example.app, signing_digests: ["\(Self.digestHex)"] }
              trust_anchors: [bad.pem]
            """
        try Self.policy(block).write(toFile: directory.path + "/p.yaml", atomically: true, encoding: .utf8)
        #expect(throws: PolicyError.self) { try PolicyLoader.load(path: directory.path + "/p.yaml") }
    }
}

@Suite struct AndroidPolicyLintTests {
    @Test func weakAndroidSettingsAreWarnedAbout() throws {
        let block = """
            android:
              apps:
                - { package: com.example.app, signing_digests: ["\(AndroidPolicyTests.digestHex)"] }
                - package: com.example.dev
                  signing_digests: ["\(AndroidPolicyTests.digestHex)"]
                  security_level: software
                  require_locked_bootloader: false
            """
        var warnings: [PolicyWarning] = []
        _ = try PolicyLoader.parse(AndroidPolicyTests.policy(block), sourcePath: "p.yaml", warnings: &warnings)
        let android = warnings.filter { $0.code.hasPrefix("android_") }
        #expect(android.map(\.code) == ["android_software_keys", "android_boot_state_not_required"])
        #expect(android.allSatisfy { $0.field == "android.apps[1]" && $0.line > 0 })
    }

    @Test func aStrictAppGivesNoWarning() throws {
        var warnings: [PolicyWarning] = []
        _ = try PolicyLoader.parse(
            AndroidPolicyTests.policy(AndroidPolicyTests.goodBlock), sourcePath: "p.yaml", warnings: &warnings)
        // goodBlock turns off require_verified_boot.
        #expect(warnings.filter { $0.code.hasPrefix("android_") }.map(\.code) == ["android_boot_state_not_required"])
    }
}
