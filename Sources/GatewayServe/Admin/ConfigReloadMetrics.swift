package import Foundation
package import GatewayIO

/// Whether the policy in force is the file on disk: what alerting on a failed reload needs
/// (Prometheus' own `prometheus_config_last_reload_successful` shape).
///
/// - `attest_gateway_config_last_reload_successful`: 1 after a successful load (start or
///   SIGHUP), 0 while the last reload failed (the previous policy is still serving).
/// - `attest_gateway_config_last_reload_success_timestamp_seconds`: when the policy in force
///   was loaded.
/// - `attest_gateway_config_reloads_total{result="ok"|"failed"}`: SIGHUP reloads.
package final class ConfigReloadMetrics: Sendable {
    private let successful: Gauge
    private let successTimestamp: Gauge
    private let reloadsOK: Counter
    private let reloadsFailed: Counter

    package init(registry: MetricsRegistry) {
        self.successful = registry.gauge(
            "attest_gateway_config_last_reload_successful",
            help:
                "1 if the last policy load (start or SIGHUP) succeeded, 0 if it failed and the previous policy serves."
        ).labels()
        self.successTimestamp = registry.gauge(
            "attest_gateway_config_last_reload_success_timestamp_seconds",
            help: "Unix time the policy in force was loaded."
        ).labels()
        let reloads = registry.counter(
            "attest_gateway_config_reloads_total", help: "Policy reloads (SIGHUP or serve --watch) by result.",
            labelNames: ["result"])
        self.reloadsOK = reloads.labels("ok")
        self.reloadsFailed = reloads.labels("failed")
    }

    /// The policy loaded at start.
    package func started(at date: Date = Date()) {
        self.successful.set(1)
        self.successTimestamp.set(Int64(date.timeIntervalSince1970))
    }

    package func reloaded(at date: Date = Date()) {
        self.reloadsOK.increment()
        self.started(at: date)
    }

    package func reloadFailed() {
        self.reloadsFailed.increment()
        self.successful.set(0)
    }
}
