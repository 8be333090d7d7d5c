import Foundation
import GatewayTesting
import Testing

@testable import AppleClient
@testable import Enforcement
@testable import HTTP1
@testable import PolicyModel

/// The policy keys of the DeviceCheck fallback: `routes[i].fallback`, `endpoints.devicecheck`,
/// `apple.device_check.token_ttl` and `.admin_token_file`, and what the policy document says.
@Suite struct DeviceCheckFallbackPolicyTests {
    static let appID = "ABCDE12345.com.example.app"

    static func yaml(route: String, apple: String?, endpoints: String = "") -> String {
        """
        environment: production
        store: memory
        app_ids: [\(Self.appID)]
        upstreams: { api: { url: "http://127.0.0.1:9000" } }
        \(endpoints)
        routes:
          - { name: premium, match: { path_prefix: /v1/premium }, upstream: api, mode: enforce\(route) }
          - { name: plain, match: { path_prefix: / }, upstream: api, mode: enforce }
        \(apple ?? "")
        """
    }

    static func apple(_ keys: AppleTestKeys, deviceCheck: String = "") -> String {
        """
        apple:
          team_id: ABCDE12345
          key_id: TESTKEY123
          private_key_file: \(keys.p8)
        \(deviceCheck.isEmpty ? "" : "  device_check: \(deviceCheck)")
        """
    }

    static func parse(_ text: String, _ keys: AppleTestKeys) throws(PolicyError) -> GatewayPolicy {
        try PolicyLoader.parse(text, sourcePath: keys.directory + "/policies.yaml")
    }

    static func error(_ text: String, _ keys: AppleTestKeys) -> PolicyError? {
        do {
            _ = try Self.parse(text, keys)
            return nil
        } catch {
            return error
        }
    }

    @Test func aRouteOffersTheFallbackAndThePolicyDocumentSaysSo() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        let policy = try Self.parse(Self.yaml(route: ", fallback: devicecheck", apple: Self.apple(keys)), keys)
        #expect(policy.routes.map(\.fallback) == [.deviceCheck, .none])
        #expect(policy.endpoints.deviceCheck == "/app-attest/devicecheck")
        #expect(policy.apple?.deviceCheck.tokenTTL == .seconds(3600), "default 1 h")
        #expect(policy.apple?.deviceCheck.adminTokenFile == nil)

        let document = PolicyDocumentEndpoint(policy: policy)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(document.body)) as? [String: Any])
        let routes = try #require(object["routes"] as? [[String: Any]])
        #expect(routes.map { $0["device_check_fallback"] as? Bool } == [true, false])
        let endpoints = try #require(object["endpoints"] as? [String: Any])
        #expect(endpoints["devicecheck"] as? String == "/app-attest/devicecheck")
        #expect(PolicySummary.render(policy).contains("fallback=devicecheck"))
    }

    @Test func theFallbackNeedsTheAppleBlock() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        let error = try #require(Self.error(Self.yaml(route: ", fallback: devicecheck", apple: nil), keys))
        #expect(error.code == .missingKey)
        #expect(error.field == "routes[0].fallback")
        #expect(error.line == 7)
        #expect(error.message.contains("apple:"))
    }

    @Test func anUnknownFallbackIsRefused() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        let error = try #require(Self.error(Self.yaml(route: ", fallback: sms", apple: Self.apple(keys)), keys))
        #expect(error.code == .invalidValue)
        #expect(error.field == "routes[0].fallback")
    }

    @Test func tokenTTLAndAdminTokenFileAreRead() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        try "  0123456789abcdef0123456789abcdef\n".write(
            toFile: keys.directory + "/admin-token", atomically: true, encoding: .utf8)
        let policy = try Self.parse(
            Self.yaml(
                route: "",
                apple: Self.apple(keys, deviceCheck: "{ token_ttl: 10m, admin_token_file: admin-token }")), keys)
        #expect(policy.apple?.deviceCheck.tokenTTL == .seconds(600))
        #expect(policy.apple?.deviceCheck.adminTokenFile == keys.directory + "/admin-token")

        let missing = try #require(
            Self.error(
                Self.yaml(route: "", apple: Self.apple(keys, deviceCheck: "{ admin_token_file: nowhere }")), keys))
        #expect(missing.code == .secretUnavailable)
        #expect(missing.field == "apple.device_check.admin_token_file")
        #expect(missing.message.contains(keys.directory + "/nowhere"))
        #expect(missing.line > 0)

        try "short\n".write(toFile: keys.directory + "/short", atomically: true, encoding: .utf8)
        let short = try #require(
            Self.error(Self.yaml(route: "", apple: Self.apple(keys, deviceCheck: "{ admin_token_file: short }")), keys))
        #expect(short.code == .secretUnavailable)
        #expect(short.message.contains("at least 16"))

        let zero = try #require(
            Self.error(Self.yaml(route: "", apple: Self.apple(keys, deviceCheck: "{ token_ttl: 0s }")), keys))
        #expect(zero.field == "apple.device_check.token_ttl")
    }

    @Test func theExchangeEndpointMustNotCollide() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        let error = try #require(
            Self.error(
                Self.yaml(
                    route: "", apple: Self.apple(keys),
                    endpoints: "endpoints: { devicecheck: /app-attest/challenge }"), keys))
        #expect(error.code == .endpointCollision)
        let moved = try Self.parse(
            Self.yaml(route: "", apple: Self.apple(keys), endpoints: "endpoints: { devicecheck: /dc/exchange }"), keys)
        #expect(moved.endpoints.deviceCheck == "/dc/exchange")
    }

    @Test func aFallbackOnAnOffRouteIsWarnedAbout() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        let text = Self.yaml(route: ", fallback: devicecheck", apple: Self.apple(keys)).replacingOccurrences(
            of: "mode: enforce, fallback", with: "mode: off, fallback")
        var warnings: [PolicyWarning] = []
        let policy = try PolicyLoader.parse(text, sourcePath: keys.directory + "/policies.yaml", warnings: &warnings)
        // (store: memory is warned about too.)
        let routeWarnings = warnings.filter { $0.field.hasPrefix("routes") }
        #expect(routeWarnings.map(\.code) == ["setting_without_effect"])
        #expect(routeWarnings.map(\.field) == ["routes[0].fallback"])
        // Nothing to fall back from: the policy document does not offer it either.
        let document = try JSONSerialization.jsonObject(with: Data(PolicyDocumentEndpoint(policy: policy).body))
        let routes = (document as? [String: Any])?["routes"] as? [[String: Any]]
        #expect(routes?.first?["device_check_fallback"] as? Bool == false)
    }

    @Test func theAdminTokenIsComparedAsABearerToken() {
        let token = DeviceCheckAdminToken(Array("0123456789abcdef0123".utf8))
        #expect(token.admits(authorization: "Bearer 0123456789abcdef0123"))
        #expect(token.admits(authorization: "bearer 0123456789abcdef0123"))
        #expect(!token.admits(authorization: "Bearer 0123456789abcdef012"))
        #expect(!token.admits(authorization: "Bearer 0123456789abcdef01234"))
        #expect(!token.admits(authorization: "Basic 0123456789abcdef0123"))
        #expect(!token.admits(authorization: "0123456789abcdef0123"))
        #expect(!token.admits(authorization: nil))
    }
}
