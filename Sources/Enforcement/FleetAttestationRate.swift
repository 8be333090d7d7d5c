import Foundation
import GatewayIO
import KeyStore

/// Attestations per App ID per minute across the fleet: each verified attestation is counted
/// in the store's shared per-app, per-minute counter, and the count read back sets the gauges;
/// above the policy's `attestation_rate_alert` the gateway warns (at most once a second) and
/// raises the alert gauge, so a farm enrolling thousands of keys shows up.
///
/// The count is sent after the key is created and its reply is not waited for: the attest
/// response is not delayed by it (one more command per attestation, none per request). The
/// minute is the gateway's clock (Unix seconds / 60): a key per minute must be named by the
/// caller on Redis Cluster, and gateways seconds apart only blur a minute's edge.
final class FleetAttestationRate: Sendable {
    private let store: (any AttestationRateCounting)?
    private let threshold: Int?
    private let metrics: any GateMetrics
    private let now: @Sendable () -> Date
    private let alertLog = LogThrottle()

    init(store: any AttestStore, threshold: Int?, metrics: any GateMetrics, now: @escaping @Sendable () -> Date) {
        self.store = store as? any AttestationRateCounting
        self.threshold = threshold
        self.metrics = metrics
        self.now = now
    }

    /// Counts one verified attestation of `appID` (an App ID of the policy: a bounded label).
    func attested(appID: String) {
        guard let store = self.store else { return }
        let minute = Int64(self.now().timeIntervalSince1970.rounded(.down)) / 60
        store.countAttestation(appID: appID, minute: minute) { [self] result in
            guard case .success(let count) = result else {
                // Counting is advisory: the key is registered; the store's own health is reported elsewhere.
                return
            }
            let alerting = self.threshold.map { count > $0 } ?? false
            self.metrics.fleetAttestations(appID: appID, perMinute: count, alerting: alerting)
            if alerting, let threshold = self.threshold, let suppressed = self.alertLog.admit() {
                Log.warning(
                    "fleet_attestation_rate_exceeded",
                    [
                        ("app_id", appID), ("per_minute", String(count)), ("threshold", String(threshold)),
                        ("suppressed", String(suppressed)),
                    ])
            }
        }
    }
}
