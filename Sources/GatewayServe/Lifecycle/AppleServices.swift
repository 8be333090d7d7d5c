package import AppleClient
package import Enforcement
import GatewayIO
import KeyStore
package import OutboundHTTP
import Verification

/// What `serve` runs for the policy's `apple:` block: one `OutboundHTTPClient` on the gateway's
/// loops and, with `fraud_risk.enabled` and a Redis store, the background refresher
/// (`FraudRiskSweeper`). `EnforcementGateFactory` keeps one across reloads while the block and
/// the store are unchanged, and replaces it (stopping the old sweeper and shutting the old
/// client down) when either changes, so a reload never leaves two refreshers running.
package final class AppleServices: Sendable {
    package let configuration: AppleConfiguration
    package let client: OutboundHTTPClient
    package let sweeper: FraudRiskSweeper?
    /// The store the sweeper works on (identity compared across reloads).
    let storeIdentity: ObjectIdentifier

    /// Builds the client (reads the `.p8` and `ca_file` again: a file broken since the load
    /// fails the start or the reload) and, when refreshes are on, the sweeper, not started.
    init(
        configuration: AppleConfiguration, store: any AttestStore, loops: [EventLoop],
        receiptVerifier: ReceiptVerifier, registry: MetricsRegistry
    ) throws(AppleError) {
        self.configuration = configuration
        self.storeIdentity = ObjectIdentifier(store)
        self.client = try AppleClientFactory.make(
            configuration, loops: loops, metrics: OutboundClientMetrics(registry: registry, peer: .apple))
        if configuration.fraudRisk.isEnabled, let redis = store.fraudRiskState {
            let refresher = FraudRiskRefresher(
                store: redis, client: self.client, configuration: configuration, verifier: receiptVerifier,
                registry: registry)
            self.sweeper = FraudRiskSweeper(refresher: refresher, interval: configuration.fraudRisk.sweepInterval)
        } else {
            self.sweeper = nil
        }
    }

    func start() {
        guard let sweeper = self.sweeper else { return }
        sweeper.start()
        Log.info(
            "fraud_risk_refresher_started",
            [
                ("owner", sweeper.refresher.owner), ("interval_ms", String(sweeper.interval.milliseconds)),
                ("requests_per_second", String(self.configuration.fraudRisk.requestsPerSecond)),
            ])
    }

    /// Stops the sweeper and closes the client's connections (queued calls fail).
    package func shutdown() {
        self.sweeper?.stop()
        self.client.shutdown()
    }
}
