import Foundation
import GatewayTesting
import Testing

extension EndToEnd {
    /// The fleet's attestation rate per App ID (issue 34) through two gateway processes sharing
    /// one Redis: each sees the fleet's count, and above `attestation_rate_alert` the alert gauge
    /// is 1 and the warning is logged.
    @Suite struct FleetAttestationRate {
        @Test(.timeLimit(.minutes(1)))
        func attestationsOnTwoGatewaysAddUpAndRaiseTheAlert() throws {
            // The count is per minute: start well inside one.
            let second = Int(Date().timeIntervalSince1970) % 60
            if second > 45 { Thread.sleep(forTimeInterval: Double(61 - second)) }
            let world = try E2EWorld()
            defer { world.shutDown() }
            let routes = """
                  - name: api
                    match: { path_prefix: /v1/ }
                    upstream: api
                    mode: enforce
                """
            let gateways = [
                try world.startGateway("gw-a", extra: "attestation_rate_alert: 2", routes: routes),
                try world.startGateway("gw-b", extra: "attestation_rate_alert: 2", routes: routes),
            ]
            for index in 0..<3 {
                #expect(try world.app().attest(with: gateways[index % 2]).status == 201)
            }
            let app = TestPolicy.appID
            let perMinute = "attest_gateway_fleet_attestations_per_minute{app_id=\"\(app)\"}"
            let alert = "attest_gateway_fleet_attestation_alert{app_id=\"\(app)\"}"
            // Each gateway reads the fleet's count after its own attestations (the counts are
            // sent after the 201s, so which gateway read the 3rd depends on their order).
            func reading(_ gateway: GatewayInstance) -> (count: Double, alert: Double)? {
                guard let metrics = try? gateway.metrics(), let count = metrics[perMinute] else { return nil }
                return (count, metrics[alert] ?? -1)
            }
            #expect(eventually { gateways.compactMap(reading).map(\.count).max() == 3 })
            let readings = gateways.map(reading)
            let last = try #require(readings.firstIndex { $0?.count == 3 })
            #expect(readings[last]?.alert == 1, "3 attestations in a minute is above 2")
            for (index, other) in readings.enumerated() where index != last {
                #expect(
                    other.map { (1...2).contains($0.count) && $0.alert == 0 } == true, "\(String(describing: other))")
            }
            #expect(eventually { !gateways[last].logEvents("fleet_attestation_rate_exceeded").isEmpty })
        }
    }
}
