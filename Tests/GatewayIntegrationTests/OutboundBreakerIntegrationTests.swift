import Dispatch
import Foundation
import GatewayTesting
import Testing

@testable import AppleClient
@testable import GatewayIO
@testable import OutboundHTTP

/// The client's breaker against `scripts/fake-apple.py` over real TLS: Apple down → the
/// breaker opens after its threshold and later calls fail at once without reaching Apple; Apple
/// back → the half-open probe succeeds and the breaker closes (gauge and counters).
@Suite(.serialized, .timeLimit(.minutes(1))) struct OutboundBreakerIntegrationTests {
    @Test func appleDownOpensTheBreakerAndItClosesWhenAppleIsBack() async throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        try fake.control("/_fake/script", #"[{"status":304}]"#)
        let loop = try EventLoop(index: 0)
        let registry = MetricsRegistry()
        let client = try OutboundHTTPClient(
            loops: [loop], tokens: AppleJWTCache(signer: try fake.signer()), caFile: fake.caFile,
            metrics: OutboundClientMetrics(registry: registry, peer: .apple), requestsPerSecond: 100,
            breaker: OutboundCircuitBreaker(failureThreshold: 3, openDuration: .seconds(3)))
        defer {
            let done = DispatchSemaphore(value: 0)
            client.shutdown {
                loop.execute {
                    loop.close(); done.signal()
                }
            }
            done.wait()
        }
        let request = try FraudRiskRequest.make(
            receipt: [1, 2, 3], environment: .production,
            override: OutboundOrigin(host: "127.0.0.1", port: fake.port))
        func gauge() -> Bool { registry.render().contains("attest_gateway_apple_breaker_state 1") }

        #expect(try await client.send(request, timeout: .seconds(5)).get().status == 304)
        try fake.control("/_fake/mode", #"{"down":true}"#)
        for _ in 0..<3 {
            let result = await client.send(request, timeout: .seconds(5))
            #expect(throws: OutboundHTTPError(.unreachable, peer: .apple, "")) { try result.get() }
        }
        #expect(client.breakerState == .open)
        #expect(gauge())
        // The client counts every call that went out (`requests_total`); a rejected one does not.
        func sent() -> Int {
            registry.render().split(separator: "\n").filter {
                $0.hasPrefix("attest_gateway_apple_requests_total{")
            }.compactMap { Int($0.split(separator: " ").last ?? "") }.reduce(0, +)
        }
        let sentBefore = sent()
        let started = ContinuousClock.now
        let rejected = await client.send(request, timeout: .seconds(5))
        #expect(throws: OutboundHTTPError(.unreachable, peer: .apple, "")) { try rejected.get() }
        #expect(rejected.failure?.isBreakerOpen == true)
        // Loose: the call's own timeout is 5 s; a busy 2-core machine delays the loop hop.
        #expect(ContinuousClock.now - started < .seconds(1), "an open breaker fails at once")
        #expect(sent() == sentBefore, "nothing went out to Apple")
        #expect(
            registry.render().contains(
                #"attest_gateway_apple_requests_rejected_total{service="fraud_risk",reason="breaker_open"} 1"#))

        // Apple is back; after the open period one probe goes out, succeeds, and closes it.
        try fake.control("/_fake/mode", #"{"down":false}"#)
        try await Task.sleep(for: .milliseconds(3100))
        #expect(try await client.send(request, timeout: .seconds(5)).get().status == 304)
        #expect(client.breakerState == .closed)
        #expect(registry.render().contains("attest_gateway_apple_breaker_state 0"))
    }
}
