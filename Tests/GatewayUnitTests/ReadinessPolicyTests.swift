import Foundation
import GatewayTesting
import Synchronization
import Testing

@testable import GatewayIO
@testable import GatewayServe
@testable import HTTP1
@testable import KeyStore
@testable import PolicyModel
@testable import RedisClient

/// `readiness.require_store`: when a store that does not answer makes `/readyz` 503.
@Suite struct ReadinessPolicyTests {
    static func route(_ name: String, _ mode: RoutePolicy.Mode, _ onStoreError: RoutePolicy.StoreErrorAction)
        -> RoutePolicy
    {
        var route = RoutePolicy(name: name, match: .init(pathPrefix: "/\(name)"), upstream: "api")
        route.mode = mode
        route.onStoreError = onStoreError
        return route
    }

    @Test func autoNeedsTheStoreOnlyForRoutesThatFailClosed() {
        let open = [Self.route("public", .off, .deny), Self.route("api", .enforce, .allow)]
        let closed = open + [Self.route("pay", .monitor, .deny)]
        let auto = ReadinessPolicy(requireStore: .auto)
        #expect(!auto.storeRequired(routes: open), "off routes and on_store_error: allow never need it")
        #expect(auto.storeRequired(routes: closed), "a monitor route with deny fails closed")
        #expect(auto.storeRequired(routes: [Self.route("api", .enforce, .deny)]))
        #expect(ReadinessPolicy(requireStore: .always).storeRequired(routes: open))
        #expect(!ReadinessPolicy(requireStore: .never).storeRequired(routes: closed))
        #expect(ReadinessPolicy() == ReadinessPolicy(requireStore: .always, storePingTimeout: .seconds(1)))
    }

    static let base = """
        listen: 127.0.0.1:8080
        store: memory
        upstreams:
          api: { url: "http://127.0.0.1:9000" }
        routes:
          - { name: public, match: { path_prefix: / }, upstream: api, mode: "off" }

        """

    @Test func theBlockDecodesAndMistakesNameTheField() throws {
        let policy = try PolicyLoader.parse(
            Self.base + "readiness: { require_store: auto, store_ping_timeout: 250ms }", sourcePath: "/p.yaml")
        #expect(policy.readiness == ReadinessPolicy(requireStore: .auto, storePingTimeout: .milliseconds(250)))
        #expect(
            PolicySummary.render(policy).contains("readiness             require_store=auto store_ping_timeout=250ms"))
        #expect(try PolicyLoader.parse(Self.base, sourcePath: "/p.yaml").readiness == ReadinessPolicy())
        let cases: [(String, PolicyError.Code, String)] = [
            ("readiness: { require_store: sometimes }", .invalidValue, "readiness.require_store"),
            ("readiness: { store_ping_timeout: 10ms }", .outOfRange, "readiness.store_ping_timeout"),
            ("readiness: { require_upstream: true }", .unknownKey, "readiness.require_upstream"),
        ]
        Self.expectRefusals(cases)
    }

    /// Each `(block, code, field)`: `base` with `block` on its line 7 is refused with that code,
    /// naming that field, line 7 and the file.
    static func expectRefusals(
        _ cases: [(String, PolicyError.Code, String)], sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for (block, code, field) in cases {
            do {
                _ = try PolicyLoader.parse(Self.base + block, sourcePath: "/p.yaml")
                Issue.record("accepted: \(block)", sourceLocation: sourceLocation)
            } catch {
                #expect(error.code == code, "\(block): \(error)", sourceLocation: sourceLocation)
                #expect(error.field == field, "\(block): \(error)", sourceLocation: sourceLocation)
                #expect(error.line == 7, "\(block)", sourceLocation: sourceLocation)
                #expect(error.file == "/p.yaml", "\(block)", sourceLocation: sourceLocation)
            }
        }
    }

    static func gate(_ store: FaultInjectingStore, required: Bool) -> AdminGate {
        AdminGate(
            metricsText: { "" }, store: { store }, isPolicyLoaded: { true }, pingTimeout: .milliseconds(200),
            storeRequired: required)
    }

    @Test func aStoreThatIsNotRequiredLeavesTheInstanceReadyButSaysSo() async {
        let store = FaultInjectingStore(wrapping: MemoryStore())
        let optional = Self.gate(store, required: false)
        let required = Self.gate(store, required: true)

        let healthy = await runGate(optional, request("GET", "/readyz")).1
        #expect(healthy.status == 200)
        #expect(healthy.json?["store"] as? String == "ok")
        #expect(healthy.json?["store_required"] as? Bool == false)

        store.set(.fail(StoreError(.unavailable, "connection refused")), for: .ping)
        let degraded = await runGate(optional, request("GET", "/readyz")).1
        #expect(degraded.status == 200)
        #expect(degraded.json?["status"] as? String == "ready")
        #expect(degraded.json?["store"] as? String == "unavailable")
        #expect((degraded.json?["reason"] as? String)?.contains("connection refused") == true)
        let down = await runGate(required, request("GET", "/readyz")).1
        #expect(down.status == 503)
        #expect(down.json?["store"] as? String == "unavailable")
        #expect(down.json?["store_required"] as? Bool == true)

        store.set(.hang, for: .ping)
        let silent = await runGate(optional, request("GET", "/readyz")).1
        #expect(silent.status == 200 && silent.json?["store"] as? String == "unavailable")
        #expect(await runGate(required, request("GET", "/readyz")).1.status == 503)
    }

    @Test func theFactoryAppliesThePolicysReadiness() async throws {
        let factory = EnforcementGateFactory(registry: MetricsRegistry())
        var policy = EnforcementGateFactoryTests.policy()
        for (requirement, required) in [(ReadinessPolicy.StoreRequirement.never, false), (.always, true)] {
            policy.readiness = ReadinessPolicy(requireStore: requirement)
            let admin = try #require(try factory.makeGates(for: policy).admin)
            let answer = await runGate(admin, request("GET", "/readyz")).1
            #expect(answer.status == 200 && answer.json?["store"] as? String == "ok")
            #expect(answer.json?["store_required"] as? Bool == required, "\(requirement)")
        }
    }
}
