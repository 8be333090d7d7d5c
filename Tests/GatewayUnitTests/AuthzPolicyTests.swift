import GatewayTesting
import Testing

@testable import PolicyModel

/// `authz_listen` and `authz_path_prefix`: decoded like a `listen` entry, checked against the
/// other listeners, and warned about when anyone may ask.
@Suite struct AuthzPolicyTests {
    static let base = """
        listen: 127.0.0.1:8080
        admin_listen: 127.0.0.1:9090
        redis: redis://127.0.0.1:6379/0
        app_ids: ["ABCDE12345.com.example.app"]
        upstreams: { api: { url: "http://127.0.0.1:9000" } }
        routes:
          - { name: api, match: { path_prefix: /v1/ }, upstream: api }

        """

    func load(_ extra: String) throws -> (GatewayPolicy, [PolicyWarning]) {
        var warnings: [PolicyWarning] = []
        let policy = try PolicyLoader.parse(extra + "\n" + Self.base, sourcePath: "policies.yaml", warnings: &warnings)
        return (policy, warnings)
    }

    func refusal(_ extra: String) -> String? {
        do {
            _ = try self.load(extra)
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test func absentByDefault() throws {
        let (policy, warnings) = try self.load("")
        #expect(policy.authzListener == nil)
        #expect(policy.authzPathPrefix == "/ext_authz")
        #expect(warnings.isEmpty)
    }

    @Test func addressOrListenerObject() throws {
        let (plain, _) = try self.load("authz_listen: 127.0.0.1:9191\nauthz_path_prefix: /check")
        #expect(plain.authzListener?.address == ListenAddress(host: "127.0.0.1", port: 9191))
        #expect(plain.authzListener?.tls == nil)
        #expect(plain.authzPathPrefix == "/check")
        #expect(PolicySummary.render(plain).contains("authz_listen"))
        #expect(PolicySummary.render(plain).contains("(envoy path_prefix /check)"))
        #expect(!PolicySummary.render(try self.load("").0).contains("authz_listen"))
        let (object, _) = try self.load("authz_listen: { address: \"127.0.0.1:9191\", proxy_protocol: true }")
        #expect(object.authzListener?.proxyProtocol == true)
    }

    @Test func refusesClashesAndBadPrefixes() {
        #expect(self.refusal("authz_listen: 127.0.0.1:8080")?.contains("collides") == true)
        #expect(self.refusal("authz_listen: 0.0.0.0:9090")?.contains("collides") == true)
        #expect(self.refusal("authz_listen: nowhere") != nil)
        for prefix in ["ext_authz", "/", "/ext_authz/", "/a?b", "\"/a b\""] {
            #expect(self.refusal("authz_path_prefix: \(prefix)") != nil, "\(prefix)")
        }
    }

    @Test func warnsWhenAnyPeerMayAsk() throws {
        let (_, open) = try self.load("authz_listen: 10.0.0.5:9191")
        #expect(open.map(\.code) == ["authz_without_trusted_proxies"])
        let (_, trusted) = try self.load("authz_listen: 10.0.0.5:9191\ntrusted_proxies: [10.0.0.0/8]")
        #expect(trusted.isEmpty)
        let (_, loopback) = try self.load("authz_listen: 127.0.0.1:9191")
        #expect(loopback.isEmpty)
    }
}
