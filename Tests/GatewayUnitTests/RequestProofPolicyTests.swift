import GatewayTesting
import Testing
import Verification

@testable import PolicyModel

/// The policy keys of issue 12: values, inheritance from the top level, and errors that name
/// line and field.
@Suite struct RequestProofPolicyTests {
    static let header = """
        store: memory
        app_ids: ["ABCDE12345.com.example.app"]
        environment: development
        upstreams: { api: { url: "http://127.0.0.1:9000" } }

        """

    @Test func keysAreReadAndRoutesInheritTheTopLevel() throws {
        let policy = try PolicyLoader.parse(
            Self.header + """
                counter_window: 32
                app_validation: { categories: [app_store, testflight, category_19], min_bundle_version: "5.2" }
                routes:
                  - name: inherits
                    match: { path_prefix: /a }
                    upstream: api
                    enforce_percent: 10
                  - name: own
                    match: { path_prefix: /b }
                    upstream: api
                    counter_window: 0
                    allow_debug_tokens: true
                    app_validation: { when_absent: deny, bundle_versions: ["5.2", 5.3] }
                """, sourcePath: "p.yaml")
        let inherits = policy.routes[0]
        #expect(inherits.counterWindow == 32)
        #expect(inherits.enforcePercent == 10)
        #expect(inherits.allowDebugTokens == false)
        #expect(inherits.appValidation?.categories == [4, 2, 19])
        #expect(inherits.appValidation?.minBundleVersion == BundleVersion("5.2"))
        #expect(inherits.appValidation?.whenAbsent == .allow)
        let own = policy.routes[1]
        #expect(own.counterWindow == 0)
        #expect(own.enforcePercent == 100)
        #expect(own.allowDebugTokens)
        #expect(own.appValidation?.categories == nil, "a route's block replaces the top-level one")
        #expect(own.appValidation?.bundleVersions == ["5.2", "5.3"])
        #expect(own.appValidation?.whenAbsent == .deny)
        let summary = PolicySummary.describe(inherits)
        #expect(summary.contains("counter_window=32 enforce_percent=10"))
        #expect(summary.contains("app_validation=categories=app_store,testflight,category_19;min_bundle_version=5.2"))
    }

    @Test func defaultsAreStrictFullAndOff() throws {
        let policy = try PolicyLoader.parse(
            Self.header + "routes: [ { match: { path_prefix: / }, upstream: api } ]", sourcePath: "p.yaml")
        let route = policy.routes[0]
        #expect(route.counterWindow == 0 && route.enforcePercent == 100 && !route.allowDebugTokens)
        #expect(route.appValidation == nil)
    }

    @Test(arguments: [
        ("counter_window: 1025", PolicyError.Code.outOfRange, "routes[0].counter_window"),
        ("counter_window: -1", .outOfRange, "routes[0].counter_window"),
        ("enforce_percent: 101", .outOfRange, "routes[0].enforce_percent"),
        ("allow_debug_tokens: \"yes\"", .wrongType, "routes[0].allow_debug_tokens"),
        ("app_validation: { categories: [appstore] }", .invalidValue, "routes[0].app_validation.categories[0]"),
        ("app_validation: { categories: [] }", .invalidValue, "routes[0].app_validation.categories"),
        ("app_validation: { when_absent: maybe }", .invalidValue, "routes[0].app_validation.when_absent"),
        (
            "app_validation: { min_bundle_version: \"5.x\" }", .invalidValue,
            "routes[0].app_validation.min_bundle_version"
        ),
        ("app_validation: { min_version: \"5\" }", .unknownKey, "routes[0].app_validation.min_version"),
        ("app_validation: [app_store]", .wrongType, "routes[0].app_validation"),
    ])
    func badValuesNameLineAndField(setting: String, code: PolicyError.Code, field: String) {
        let text =
            Self.header + """
                routes:
                  - match: { path_prefix: / }
                    upstream: api
                    \(setting)
                """
        let error = policyError(text)
        #expect(error?.code == code, "\(String(describing: error))")
        #expect(error?.line == 8, "\(String(describing: error))")
        #expect(error?.field == field, "\(String(describing: error))")
        #expect(error?.file == "policies.yaml")
    }

    @Test func suggestionsAndMessagesSayWhatIsExpected() {
        let error = policyError(
            Self.header
                + "routes: [ { match: { path_prefix: / }, upstream: api, app_validation: { categories: [appstore] } } ]"
        )
        #expect(
            error?.message.contains("expected one of invalid, platform, testflight, development, app_store") == true)
        #expect(error?.message.contains("found \"appstore\"") == true)
    }

    @Test func debugTokensUnderProductionAndPercentOffEnforceAreWarned() throws {
        var warnings: [PolicyWarning] = []
        _ = try PolicyLoader.parse(
            """
            store: memory
            app_ids: ["ABCDE12345.com.example.app"]
            upstreams: { api: { url: "http://127.0.0.1:9000" } }
            routes:
              - name: ci
                match: { path_prefix: /ci }
                upstream: api
                allow_debug_tokens: true
              - name: watch
                match: { path_prefix: /w }
                upstream: api
                mode: monitor
                enforce_percent: 50
            """, sourcePath: "p.yaml", warnings: &warnings)
        let debug = warnings.first { $0.code == "debug_tokens_in_production" }
        #expect(debug?.line == 8 && debug?.field == "routes[0].allow_debug_tokens")
        let percent = warnings.first { $0.code == "setting_without_effect" }
        #expect(percent?.field == "routes[1].enforce_percent")

        var none: [PolicyWarning] = []
        _ = try PolicyLoader.parse(
            Self.header + "routes: [ { match: { path_prefix: / }, upstream: api, allow_debug_tokens: true } ]",
            sourcePath: "p.yaml", warnings: &none)
        #expect(!none.contains { $0.code == "debug_tokens_in_production" }, "development: no warning")
    }
}
