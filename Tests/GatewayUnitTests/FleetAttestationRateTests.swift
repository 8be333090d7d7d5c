import Foundation
import GatewayTesting
import Simulator
import Testing

@testable import Enforcement
@testable import KeyStore
@testable import PolicyModel

/// The fleet's attestation rate per App ID (issue 34): `attestation_rate_alert` decoded, each
/// registered key counted in the store's per-minute counter, the gauges and the alert flag.
@Suite struct FleetAttestationRateTests {
    static let routes = """
          - name: api
            match: { path_prefix: /v1/ }
            upstream: api
        """

    @Test func aFarmAboveTheThresholdRaisesTheAlert() async throws {
        // One clock reading for the whole test: its attestations fall in one minute.
        let start = Date()
        let h = try ProofHarness(routes: Self.routes, top: "attestation_rate_alert: 2", now: { start })
        for expected in 1...3 {
            #expect(try await h.attest(try SimulatedDevice.generate()).status == 201)
            let seen = eventually {
                h.metrics.snapshot.fleetAttestations[ProofHarness.appID]?.perMinute == expected
            }
            #expect(seen, "count \(expected): \(String(describing: h.metrics.snapshot.fleetAttestations))")
            #expect(h.metrics.snapshot.fleetAttestations[ProofHarness.appID]?.alerting == (expected > 2))
        }
    }

    @Test func aRefusedAttestationIsNotCounted() async throws {
        let start = Date()
        let h = try ProofHarness(routes: Self.routes, top: "attestation_rate_alert: 1", now: { start })
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        #expect(eventually { h.metrics.snapshot.fleetAttestations[ProofHarness.appID]?.perMinute == 1 })
        #expect(try await h.attest(device).status == 409, "the same key again")
        #expect(h.metrics.snapshot.fleetAttestations[ProofHarness.appID]?.perMinute == 1)
        #expect(h.metrics.snapshot.fleetAttestations[ProofHarness.appID]?.alerting == false)
    }

    @Test func theMemoryStoreCountsPerMinute() async {
        let store = MemoryStore()
        func count(_ app: String, _ minute: Int64) async -> Int? {
            await withCheckedContinuation { c in
                store.countAttestation(appID: app, minute: minute) { c.resume(returning: try? $0.get()) }
            }
        }
        #expect(await count("A", 10) == 1)
        #expect(await count("A", 10) == 2)
        #expect(await count("B", 10) == 1, "apps count apart")
        #expect(await count("A", 11) == 1, "a new minute starts at one")
    }

    @Test(arguments: ["attestation_rate_alert: 0", "attestation_rate_alert: many"])
    func badThresholdsNameTheField(setting: String) {
        let error = policyError(RequestProofPolicyTests.header + setting + "\n")
        #expect(error?.field == "attestation_rate_alert", "\(String(describing: error))")
    }

    @Test func theThresholdIsDecoded() throws {
        let policy = try PolicyLoader.parse(
            RequestProofPolicyTests.header + "attestation_rate_alert: 500\n", sourcePath: "p.yaml")
        #expect(policy.attestationRateAlert == 500)
        #expect(PolicySummary.render(policy).contains("attestation_rate_alert"))
        #expect(
            try PolicyLoader.parse(RequestProofPolicyTests.header, sourcePath: "p.yaml").attestationRateAlert == nil)
    }
}
