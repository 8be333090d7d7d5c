import GatewayTesting
import Testing

@testable import PolicyModel

/// Legal but suspicious settings load, with a warning naming line and field.
@Suite struct PolicyWarningTests {
    private func warnings(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> [PolicyWarning] {
        var warnings: [PolicyWarning] = []
        do {
            _ = try PolicyLoader.parse(text, sourcePath: "policies.yaml", warnings: &warnings)
        } catch {
            Issue.record("policy refused: \(error)", sourceLocation: sourceLocation)
        }
        return warnings
    }

    private static let header = """
        redis: redis://127.0.0.1:6379/0
        app_ids: ["ABCDE12345.com.example.app"]
        upstreams: { api: { url: "http://127.0.0.1:9000" } }
        routes:

        """

    @Test func routesAfterACatchAllAreUnreachable() {
        let text =
            Self.header + """
                  - { name: all, match: { path_prefix: / }, upstream: api, mode: off }
                  - { name: late, match: { path: /v1/x }, upstream: api }
                  - { name: later, match: { path_prefix: /v2, methods: [GET] }, upstream: api }
                """
        let found = self.warnings(text)
        #expect(found.map(\.code) == ["unreachable_route", "unreachable_route"])
        #expect(found.map(\.field) == ["routes[1]", "routes[2]"])
        #expect(found.map(\.line) == [6, 7])
        #expect(
            found.first?.description
                == "policies.yaml:6:5: routes[1]: route \"late\" can never match: routes[0] (\"all\") matches every request it would, and the first match wins"
        )
    }

    @Test func shadowingFollowsSegmentBoundariesAndMethods() {
        let text =
            Self.header + """
                  - { name: v1, match: { path_prefix: /v1, methods: [GET, POST] }, upstream: api }
                  - { name: v1x, match: { path_prefix: /v1x }, upstream: api }
                  - { name: v1put, match: { path_prefix: /v1/a, methods: [PUT] }, upstream: api }
                  - { name: v1any, match: { path_prefix: /v1/a }, upstream: api }
                  - { name: v1get, match: { path: /v1/a/b, methods: [GET] }, upstream: api }
                  - { name: dir, match: { path_prefix: /d/ }, upstream: api }
                  - { name: bare, match: { path: /d }, upstream: api }
                  - { name: under, match: { path: /d/x }, upstream: api }
                  - { name: exact, match: { path: /e }, upstream: api }
                  - { name: exact2, match: { path: /e, methods: [GET] }, upstream: api }
                  - { name: longer, match: { path_prefix: /e }, upstream: api }
                """
        let found = self.warnings(text)
        // v1x: another segment; v1put/v1any: other methods; bare: /d/ does not match /d;
        // longer: an exact /e does not cover /e/...
        #expect(found.map(\.field) == ["routes[4]", "routes[7]", "routes[9]"])
        #expect(found.allSatisfy { $0.code == "unreachable_route" })
    }

    @Test func caseSensitiveRouteHidesOnlyItsOwnSpelling() {
        let text =
            Self.header + """
                  - { name: cs, match: { path_prefix: /cs/ }, upstream: api, case_sensitive: true }
                  - { name: folded, match: { path_prefix: /cs/v2 }, upstream: api }
                  - { name: same, match: { path: /cs/v3 }, upstream: api, case_sensitive: true }
                  - { name: digits, match: { path_prefix: /1/ }, upstream: api, case_sensitive: true }
                  - { name: under, match: { path: /1/a }, upstream: api }
                """
        let found = self.warnings(text)
        // folded: /CS/v2 never reaches cs, so folded still matches it; same: spelled as cs;
        // under: /1/ has no letters to spell, so it matches /1/A too.
        #expect(found.map(\.field) == ["routes[2]", "routes[4]"])
        #expect(found.allSatisfy { $0.code == "unreachable_route" })
    }

    /// Only the `case_sensitive_route_shadowed` warnings of a policy.
    private func caseShadows(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> [PolicyWarning] {
        self.warnings(text, sourceLocation: sourceLocation).filter { $0.code == "case_sensitive_route_shadowed" }
    }

    @Test func caseSensitiveEnforceRouteShadowedByAnOffCatchAll() {
        let text =
            Self.header + """
                  - name: cs
                    match: { path_prefix: /cs/ }
                    upstream: api
                    case_sensitive: true
                  - { name: all, match: { path_prefix: / }, upstream: api, mode: off }
                """
        let found = self.warnings(text)
        #expect(found.map(\.code) == ["case_sensitive_route_shadowed"])
        #expect(found.map(\.field) == ["routes[0].case_sensitive"])
        #expect(found.map(\.line) == [8])
        #expect(
            found.first?.description
                == "policies.yaml:8:5: routes[0].case_sensitive: route \"cs\" matches case-sensitively, but GET /CS/x goes to routes[1] (\"all\") and is forwarded without attestation (mode off), while GET /cs/x is checked here: a case-insensitive upstream (Express by default) runs one handler for both; fix: add a case-insensitive route for path_prefix /cs/ with this route's mode (enforce) and settings ahead of routes[1], or make the upstream route case-sensitively"
        )
    }

    @Test(arguments: [
        ("", "mode: monitor", "is forwarded even without a valid assertion (mode monitor)"),
        ("", "enforce_percent: 50", "is enforced for 50% of clients only (enforce_percent 50)"),
        ("", "allow_debug_tokens: true", "passes with a debug token instead of an assertion (allow_debug_tokens)"),
        ("", "on_store_error: allow", "is forwarded unverified while the store is unreachable (on_store_error: allow)"),
        ("challenge: required, ", "mode: enforce", "passes without a fresh challenge (challenge: none)"),
        ("mode: monitor, ", "mode: off", "is forwarded without attestation (mode off)"),
    ])
    func caseSensitiveRouteShadowedByEachKindOfWeakerRoute(protected: String, weaker: String, outcome: String) {
        let text =
            Self.header + """
                  - { name: cs, match: { path_prefix: /cs/ }, upstream: api, \(protected)case_sensitive: true }
                  - { name: rest, match: { path_prefix: / }, upstream: api, \(weaker) }
                """
        let found = self.caseShadows(text)
        #expect(found.map(\.field) == ["routes[0].case_sensitive"])
        #expect(found.map(\.line) == [5])
        #expect(
            found.first?.message.contains("GET /CS/x goes to routes[1] (\"rest\") and \(outcome), while GET /cs/x")
                == true,
            "\(found)")
    }

    @Test func caseShadowFollowsRouteOrderMethodsAndUpstreams() {
        let text = """
            redis: redis://127.0.0.1:6379/0
            app_ids: ["ABCDE12345.com.example.app"]
            upstreams:
              api: { url: "http://127.0.0.1:9000" }
              alias: { url: "http://127.0.0.1:9000" }
              web: { url: "http://127.0.0.1:9001" }
            routes:
              - { name: upper, match: { path_prefix: /CS/ }, upstream: api, mode: off, case_sensitive: true }
              - { name: cs, match: { path_prefix: /cs/ }, upstream: api, case_sensitive: true }
              - { name: read, match: { path: /doc/a, methods: [GET] }, upstream: api, case_sensitive: true }
              - { name: peek, match: { path: /doc/A, methods: [HEAD] }, upstream: api, mode: off, case_sensitive: true }
              - { name: post, match: { path_prefix: /p/, methods: [POST] }, upstream: api, case_sensitive: true }
              - { name: list, match: { path_prefix: /P/, methods: [GET] }, upstream: api, mode: off }
              - { name: other, match: { path_prefix: /o/ }, upstream: api, case_sensitive: true }
              - { name: site, match: { path_prefix: /O/ }, upstream: web, mode: off }
              - { name: same, match: { path_prefix: /s/ }, upstream: api, case_sensitive: true }
              - { name: mirror, match: { path_prefix: /S/ }, upstream: alias, mode: off }
            """
        let found = self.caseShadows(text)
        // cs: an earlier case-sensitive route takes /CS/; read: GET implies HEAD, and HEAD
        // /doc/A reaches peek; post: list admits GET only, so POST /P/x reaches no route;
        // other: site is another upstream; same: mirror is the same host and port.
        #expect(
            found.map(\.field) == ["routes[1].case_sensitive", "routes[2].case_sensitive", "routes[8].case_sensitive"])
        #expect(found.map(\.line) == [9, 10, 16])
        let messages = found.map(\.message)
        #expect(messages.first?.contains("GET /CS/x goes to routes[0] (\"upper\")") == true, "\(messages)")
        #expect(messages.dropFirst().first?.contains("HEAD /doc/A goes to routes[3] (\"peek\")") == true, "\(messages)")
        #expect(messages.last?.contains("GET /S/x goes to routes[9] (\"mirror\")") == true, "\(messages)")
    }

    @Test(arguments: [
        // No route takes the folded path: /CS/x is a 404.
        """
          - { name: cs, match: { path_prefix: /cs/ }, upstream: api, case_sensitive: true }
          - { name: other, match: { path_prefix: /other }, upstream: api, mode: off }
        """,
        // The weaker route's methods leave out the protected one's: POST /CS/x reaches no route.
        """
          - { name: cs, match: { path_prefix: /cs/, methods: [POST] }, upstream: api, case_sensitive: true }
          - { name: reads, match: { path_prefix: /, methods: [GET] }, upstream: api, mode: off }
        """,
        // The fix: a case-insensitive enforce route for the folded path before the catch-all.
        """
          - { name: cs, match: { path_prefix: /cs/ }, upstream: api, case_sensitive: true }
          - { name: folded, match: { path_prefix: /cs/ }, upstream: api }
          - { name: all, match: { path_prefix: / }, upstream: api, mode: off }
        """,
        // No letters to spell otherwise.
        """
          - { name: digits, match: { path_prefix: /123/ }, upstream: api, case_sensitive: true }
          - { name: all, match: { path_prefix: / }, upstream: api, mode: off }
        """,
        // The other spellings reach a route as strict.
        """
          - { name: cs, match: { path: /cs/buy }, upstream: api, case_sensitive: true, enforce_percent: 50 }
          - { name: all, match: { path_prefix: / }, upstream: api, enforce_percent: 50 }
        """,
        """
          - { name: cs, match: { path_prefix: /cs/ }, upstream: api, mode: monitor, case_sensitive: true }
          - { name: all, match: { path_prefix: / }, upstream: api, mode: monitor }
        """,
        // An off route is not protected, whatever its case.
        """
          - { name: cs, match: { path_prefix: /cs/ }, upstream: api, mode: off, case_sensitive: true }
          - { name: all, match: { path_prefix: / }, upstream: api, mode: off }
        """,
        // An earlier exemption takes every spelling of its path, the protected one included.
        """
          - { name: public, match: { path_prefix: /cs/public }, upstream: api, mode: off }
          - { name: cs, match: { path_prefix: /cs/ }, upstream: api, case_sensitive: true }
        """,
    ])
    func caseSensitiveRouteNotShadowed(routes: String) {
        #expect(self.caseShadows(Self.header + routes).isEmpty)
    }

    @Test func exactRouteOnAnEndpointPathIsUnreachable() {
        let text =
            Self.header + """
                  - { name: grab, match: { path: /app-attest/challenge }, upstream: api }
                  - { name: rest, match: { path_prefix: / }, upstream: api }
                """
        let found = self.warnings(text)
        #expect(found.map(\.code) == ["unreachable_route"])
        #expect(found.first?.message.contains("the gateway answers /app-attest/challenge itself") == true)
    }

    @Test func settingsWithoutEffectAndFailOpen() {
        let text =
            Self.header + """
                  - name: free
                    match: { path_prefix: /free }
                    upstream: api
                    mode: off
                    challenge: required
                  - name: field
                    match: { path_prefix: /f }
                    upstream: api
                    challenge_field: nonce
                  - name: open
                    match: { path_prefix: /o }
                    upstream: api
                    on_store_error: allow
                """
        let found = self.warnings(text)
        #expect(found.map(\.code) == ["setting_without_effect", "setting_without_effect", "store_error_allows"])
        #expect(found.map(\.field) == ["routes[0].challenge", "routes[1].challenge_field", "routes[2].on_store_error"])
        #expect(found.map(\.line) == [9, 13, 17])
    }

    @Test func memoryStoreAndNoRoutes() {
        let found = self.warnings("store: memory\n")
        #expect(found.map(\.code) == ["memory_store", "no_routes"])
        #expect(self.warnings("store: memory\nroutes: []\n").map(\.code) == ["memory_store", "no_routes"])
    }

    @Test func cleanPoliciesHaveNoWarnings() {
        #expect(self.warnings(designExamplePolicy).isEmpty)
        let text =
            Self.header + """
                  - { name: body, match: { path: /redeem, methods: [POST] }, upstream: api, binding: body, challenge: required, challenge_field: nonce }
                  - { name: rest, match: { path_prefix: / }, upstream: api, mode: monitor }
                """
        #expect(self.warnings(text).isEmpty)
    }
}
