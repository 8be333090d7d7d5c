/// The trace export's metric families (docs/operations.md "Traces"):
/// `attest_gateway_trace_spans_exported_total`, `attest_gateway_trace_spans_dropped_total{reason}`
/// (`queue_full`, `export_failed`, `rejected`), `attest_gateway_trace_export_errors_total{kind}`
/// (`connect`, `timeout`, `status`, `retryable_status`) and `attest_gateway_trace_queue_spans`.
package final class TracingMetrics: Sendable {
    package let exported: Counter
    package let droppedQueueFull: Counter
    package let droppedExportFailed: Counter
    package let droppedRejected: Counter
    package let errorConnect: Counter
    package let errorTimeout: Counter
    package let errorStatus: Counter
    package let errorRetryableStatus: Counter
    package let queueLength: Gauge

    /// Every `reason` label value of the dropped family.
    package static let dropReasons = ["queue_full", "export_failed", "rejected"]
    /// Every `kind` label value of the errors family.
    package static let errorKinds = ["connect", "timeout", "status", "retryable_status"]

    package init(registry: MetricsRegistry) {
        self.exported =
            registry.counter(
                "attest_gateway_trace_spans_exported_total",
                help: "Spans the OTLP collector accepted."
            ).labels()
        let dropped = registry.counter(
            "attest_gateway_trace_spans_dropped_total",
            help: "Spans not exported, by reason (queue_full, export_failed, rejected).", labelNames: ["reason"])
        self.droppedQueueFull = dropped.labels("queue_full")
        self.droppedExportFailed = dropped.labels("export_failed")
        self.droppedRejected = dropped.labels("rejected")
        let errors = registry.counter(
            "attest_gateway_trace_export_errors_total",
            help: "Failed OTLP export attempts, by kind (connect, timeout, status, retryable_status).",
            labelNames: ["kind"])
        self.errorConnect = errors.labels("connect")
        self.errorTimeout = errors.labels("timeout")
        self.errorStatus = errors.labels("status")
        self.errorRetryableStatus = errors.labels("retryable_status")
        self.queueLength =
            registry.gauge(
                "attest_gateway_trace_queue_spans", help: "Spans waiting in the export queue."
            ).labels()
    }
}
