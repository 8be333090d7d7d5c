import Testing

@testable import Gateway

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
