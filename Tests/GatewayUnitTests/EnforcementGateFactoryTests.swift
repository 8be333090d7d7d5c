import Foundation
import GatewayTesting
import Simulator
import Testing
import Verification

@testable import Enforcement
@testable import GateContract
@testable import GatewayIO
@testable import GatewayServe
@testable import HTTP1
@testable import PolicyModel
@testable import RedisClient

@Suite struct EnforcementGateFactoryTests {
    static func policy(store: StoreConfiguration = .memory, trustRoots: [String] = []) -> GatewayPolicy {
        EnforcementHarness.gatewayPolicy(store: store, trustRoots: trustRoots)
    }

    static func rootFile() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("enf-root-\(UUID().uuidString).pem")
            .path
        try EnforcementHarness.authority.rootCertificatePEM.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func reloadKeepsTheStoreWhileItsSettingIsUnchanged() async throws {
        let root = try Self.rootFile()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let factory = EnforcementGateFactory(registry: MetricsRegistry())
        let first = try factory.makeGates(for: Self.policy(trustRoots: [root])).main
        let device = try SimulatedDevice.generate()

        // Attest through the first gate (challenge issued by it too).
        let issued = await runGate(first, request("POST", "/app-attest/challenge")).1
        let challenge = try #require(issued.json?["challenge"] as? String)
        let body = try EnforcementHarness().attestBody(device, challenge: challenge)
        #expect(await runGate(first, request("POST", "/app-attest/attest"), body: body).1.status == 201)

        // A reload with the same store setting: the key is still known.
        let reloaded = try factory.makeGates(for: Self.policy(trustRoots: [root])).main
        let head = try EnforcementHarness.signed(device, counter: 1, method: "GET", target: "/v1/a")
        #expect(await runGate(reloaded, head).1.forwardedHead?.headers["X-App-Attest-Status"] == "verified")

        // Another store setting builds another store: the memory store starts empty.
        let redis = "redis://127.0.0.1:1/0"  // never contacted by this test before a request
        let moved = try factory.makeGates(for: Self.policy(store: .redis(url: redis), trustRoots: [root]))
        _ = moved
        let back = try factory.makeGates(for: Self.policy(trustRoots: [root])).main
        let again = try EnforcementHarness.signed(device, counter: 2, method: "GET", target: "/v1/a")
        #expect(await runGate(back, again).1.errorCode == "unknown_key")
    }

    @Test func unreadableTrustRootOrBadRedisURLFailsTheBuild() throws {
        let factory = EnforcementGateFactory(registry: MetricsRegistry())
        #expect(throws: EnforcementGateFactory.BuildError.self) {
            try factory.makeGates(for: Self.policy(trustRoots: ["/nonexistent/root.pem"]))
        }
        #expect(throws: EnforcementGateFactory.BuildError.self) {
            try factory.makeGates(for: Self.policy(store: .redis(url: "http://not-redis")))
        }
        let garbage = FileManager.default.temporaryDirectory.appendingPathComponent("enf-bad-\(UUID().uuidString).pem")
            .path
        try "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".write(
            toFile: garbage,
            atomically: true,
            encoding: .utf8
        )
        defer { try? FileManager.default.removeItem(atPath: garbage) }
        #expect(throws: EnforcementGateFactory.BuildError.self) {
            try factory.makeGates(for: Self.policy(trustRoots: [garbage]))
        }
    }

    @Test func metricsAreRenderedForTheRegistry() async throws {
        let registry = MetricsRegistry()
        let metrics = GatewayGateMetrics(registry: registry, routeNames: ["premium", "api"])
        metrics.requestDecided(route: "premium", verdict: .verified)
        metrics.requestDecided(route: "premium", verdict: .verified)
        metrics.requestDecided(route: "api", verdict: .counterReplay)
        metrics.requestDecided(route: "unlisted", verdict: .missing)
        metrics.attestation(result: "nonce_mismatch")
        metrics.challengeIssued()
        metrics.verificationLatency(seconds: 0.0003)
        metrics.storeError(operation: "advance_counter", kind: .timeout)
        let text = registry.render()
        #expect(text.contains("attest_gateway_verdicts_total{route=\"premium\",verdict=\"verified\"} 2"))
        #expect(text.contains("attest_gateway_verdicts_total{route=\"api\",verdict=\"counter_replay\"} 1"))
        #expect(text.contains("attest_gateway_verdicts_total{route=\"unlisted\",verdict=\"missing\"} 1"))
        #expect(text.contains("attest_gateway_attestations_total{result=\"nonce_mismatch\"} 1"))
        #expect(text.contains("attest_gateway_challenges_issued_total 1"))
        #expect(text.contains("attest_gateway_verification_duration_seconds_count 1"))
        #expect(text.contains("attest_gateway_verification_duration_seconds_bucket{le=\"0.0005\"} 1"))
        #expect(
            text.contains("attest_gateway_store_errors_total{operation=\"advance_counter\",kind=\"store_timeout\"} 1")
        )
        // A second instance on the same registry (a reload) adds to the same series.
        GatewayGateMetrics(registry: registry, routeNames: ["premium"]).requestDecided(
            route: "premium",
            verdict: .verified
        )
        #expect(registry.render().contains("attest_gateway_verdicts_total{route=\"premium\",verdict=\"verified\"} 3"))
    }

    /// The passthrough path counts by the route's index in the policy: the same series as by
    /// name, and an index the metrics do not know falls back to the name.
    @Test func verdictsByRouteIndexLandInTheRoutesSeries() {
        let registry = MetricsRegistry()
        let metrics = GatewayGateMetrics(registry: registry, routeNames: ["premium", "api"])
        metrics.requestDecided(routeIndex: 1, route: "api", verdict: .skipped)
        metrics.requestDecided(routeIndex: 1, route: "api", verdict: .skipped)
        metrics.requestDecided(route: "api", verdict: .skipped)
        metrics.requestDecided(routeIndex: 0, route: "premium", verdict: .verified)
        metrics.requestDecided(routeIndex: 7, route: "later", verdict: .skipped)
        let text = registry.render()
        #expect(text.contains("attest_gateway_verdicts_total{route=\"api\",verdict=\"skipped\"} 3"))
        #expect(text.contains("attest_gateway_verdicts_total{route=\"premium\",verdict=\"verified\"} 1"))
        #expect(text.contains("attest_gateway_verdicts_total{route=\"premium\",verdict=\"skipped\"} 0"))
        #expect(text.contains("attest_gateway_verdicts_total{route=\"later\",verdict=\"skipped\"} 1"))
    }
}
