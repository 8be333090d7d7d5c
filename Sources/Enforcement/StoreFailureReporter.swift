import GatewayIO
import RedisClient

/// What the gate does with every failed store call on the request path: count it in
/// `attest_gateway_store_errors_total`, and log it at most once a second, because an outage
/// fails every request and one line each would flood the log when it hurts most.
///
/// One instance per gate, shared by the protected routes and the attest endpoint, so one
/// outage makes one line a second whichever path meets it. Lock-free; any queue.
final class StoreFailureReporter: Sendable {
    private let metrics: any GateMetrics
    private let log = LogThrottle()

    init(metrics: any GateMetrics) {
        self.metrics = metrics
    }

    /// `operation` names the store call (`fetch_key`, `redeem_challenge`, ...); `route` the
    /// route or endpoint label the request was on.
    func report(_ error: StoreError, operation: String, route: String) {
        self.metrics.storeError(operation: operation, kind: error.kind)
        guard let suppressed = self.log.admit() else { return }
        Log.warning(
            "store_error",
            [
                ("route", route), ("operation", operation), ("error", error.description),
                ("suppressed_since_last", String(suppressed)),
            ]
        )
    }
}
