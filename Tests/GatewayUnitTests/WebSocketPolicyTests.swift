import Testing

@testable import GateContract
@testable import HTTPProxy
@testable import PolicyModel

/// `routes[i].websocket` and `tunnels:`: defaults, errors that name line and field, the lint
/// warnings, and what reaches the connections (`ServingConfiguration`).
@Suite struct WebSocketPolicyTests {
    static let header = """
        store: memory
        app_ids: ["ABCDE12345.com.example.app"]
        upstreams: { api: { url: "http://127.0.0.1:9000" } }

        """

    @Test func websocketIsOffByDefaultAndTunnelsHaveTheirDefaults() throws {
        let policy = try PolicyLoader.parse(
            Self.header + "routes: [ { name: r, match: { path_prefix: / }, upstream: api, mode: off } ]\n",
            sourcePath: "policies.yaml")
        #expect(policy.routes[0].websocket == false)
        #expect(policy.tunnels == TunnelPolicy(idleTimeout: .seconds(300), maxLifetime: .seconds(3600)))
        let serving = ServingConfiguration(policy: policy, gates: [:], accessLogKeyID: .prefix)
        #expect(serving.websocketRoutes.isEmpty)
    }

    @Test func aWebSocketRouteAndTunnelSettingsReachTheServingConfiguration() throws {
        let policy = try PolicyLoader.parse(
            Self.header + """
                tunnels: { idle_timeout: 90s, max_lifetime: 2h }
                routes:
                  - { name: live, match: { path_prefix: /live }, upstream: api, mode: enforce, websocket: true }
                  - { name: rest, match: { path_prefix: / }, upstream: api, mode: off }
                """, sourcePath: "policies.yaml")
        #expect(policy.routes.map(\.websocket) == [true, false])
        #expect(policy.tunnels == TunnelPolicy(idleTimeout: .seconds(90), maxLifetime: .seconds(7200)))
        let summary = PolicySummary.render(policy)
        #expect(summary.contains("websocket=true"))
        #expect(summary.contains("idle_timeout=90s max_lifetime=2h"))
        let serving = ServingConfiguration(policy: policy, gates: [:], accessLogKeyID: .prefix)
        #expect(serving.websocketRoutes == ["live"])
        #expect(serving.tunnels.maxLifetime == .seconds(7200))
    }

    @Test func badValuesNameTheirLineAndField() throws {
        let notBool = try #require(
            policyError(
                Self.header + "routes:\n  - { match: { path_prefix: / }, upstream: api, mode: off, websocket: maybe }\n"
            ))
        #expect(notBool.field == "routes[0].websocket")
        #expect(notBool.line == 5)
        let tooLong = try #require(policyError(Self.header + "tunnels:\n  max_lifetime: 2d\n"))
        #expect(tooLong.field == "tunnels.max_lifetime")
        #expect(tooLong.line == 5)
        let unknown = try #require(policyError(Self.header + "tunnels: { idle: 5s }\n"))
        #expect(unknown.code == .unknownKey)
        let zero = try #require(policyError(Self.header + "tunnels: { idle_timeout: 0 }\n"))
        #expect(zero.field == "tunnels.idle_timeout")
    }

    @Test func lintWarnsWhereNoUpgradeCanEverPass() throws {
        var warnings: [PolicyWarning] = []
        _ = try PolicyLoader.parse(
            Self.header + """
                routes:
                  - { name: posts, match: { path: /p, methods: [POST] }, upstream: api, mode: off, websocket: true }
                  - name: body
                    match: { path: /b }
                    upstream: api
                    binding: body
                    challenge: required
                    websocket: true
                  - { name: fine, match: { path: /f, methods: [GET] }, upstream: api, websocket: true }
                """, sourcePath: "policies.yaml", warnings: &warnings)
        let routeWarnings = warnings.filter { $0.code != "memory_store" }
        #expect(routeWarnings.map(\.code) == ["setting_without_effect", "websocket_challenge_in_body"])
        #expect(routeWarnings.map(\.field) == ["routes[0].websocket", "routes[1].websocket"])
    }
}
