package import GatewayIO

/// The fraud-risk refresher's metrics:
///
/// - `attest_gateway_apple_fraud_risk_refreshes_total{outcome}`: refreshes by outcome
///   (`refreshed`, `not_modified`, `no_data`, an `apple_*` or verification code, `key_inactive`).
/// - `attest_gateway_apple_risk_metric`: risk metrics of verified refreshed receipts.
package struct FraudRiskRefreshMetrics: Sendable {
    package let refreshes: CounterFamily
    package let riskMetrics: HistogramFamily

    package init(registry: MetricsRegistry) {
        self.refreshes = registry.counter(
            "attest_gateway_apple_fraud_risk_refreshes_total", help: "Fraud-risk receipt refreshes by outcome",
            labelNames: ["outcome"])
        self.riskMetrics = registry.histogram(
            "attest_gateway_apple_risk_metric", help: "Risk metrics of refreshed receipts (a count, not seconds)",
            buckets: [1, 2, 3, 5, 10, 20, 50, 100])
    }

    package func refreshed(outcome: String) { self.refreshes.labels(outcome).increment() }

    package func riskMetric(_ value: Int) { self.riskMetrics.labels().observe(seconds: Double(value)) }
}
