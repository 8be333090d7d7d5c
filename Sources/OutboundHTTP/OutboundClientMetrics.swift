package import GatewayIO

/// An outbound client's metrics, registered once per registry and peer, named after the peer
/// (`attest_gateway_apple_*` for Apple's client, `attest_gateway_google_*` for Google's):
///
/// - `attest_gateway_<peer>_requests_total{service,outcome}`: every call, by service (Apple's
///   `devicecheck`, `fraud_risk`; Google's `android_revocation`, `play_integrity_token`,
///   `play_integrity_decode`) and outcome (the HTTP status, or the `OutboundHTTPError` code
///   when there was no answer: `apple_timeout`, `google_tls_failed`, `google_unreachable`, …).
/// - `attest_gateway_<peer>_request_duration_seconds{service}`: time from queueing to the
///   outcome, answers and failures alike.
/// - `attest_gateway_<peer>_requests_rejected_total{service,reason}`: calls refused by the
///   gateway itself before reaching the peer (`breaker_open`, `rate_limited`).
/// - `attest_gateway_<peer>_retries_total{service}`: calls sent again after a 429, a 5xx or no
///   answer (`OutboundRetryPolicy`; Apple's DeviceCheck calls).
/// - `attest_gateway_<peer>_breaker_state`: the circuit breaker, 0 closed, 1 open, 2 half-open.
package struct OutboundClientMetrics: Sendable {
    package let requests: CounterFamily
    package let duration: HistogramFamily
    package let rejections: CounterFamily
    package let breaker: GaugeFamily
    package let retries: CounterFamily

    /// Whom the client talks to: the families' name prefix (Apple's and Google's clients count
    /// apart) and the prefix of the error codes in `outcome`.
    package let peer: OutboundPeer

    package init(registry: MetricsRegistry, peer: OutboundPeer) {
        self.peer = peer
        let prefix = "attest_gateway_\(peer.name)"
        let name = peer.displayName
        self.requests = registry.counter(
            "\(prefix)_requests_total", help: "Calls to \(name)'s servers by service and outcome",
            labelNames: ["service", "outcome"])
        self.duration = registry.histogram(
            "\(prefix)_request_duration_seconds", help: "Latency of calls to \(name)'s servers",
            labelNames: ["service"], buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30])
        self.rejections = registry.counter(
            "\(prefix)_requests_rejected_total",
            help: "Calls to \(name) refused by the gateway (open breaker, rate limit)",
            labelNames: ["service", "reason"])
        self.breaker = registry.gauge(
            "\(prefix)_breaker_state", help: "Circuit breaker towards \(name): 0 closed, 1 open, 2 half-open")
        self.retries = registry.counter(
            "\(prefix)_retries_total",
            help: "Calls to \(name) sent again after a 429, a 5xx or no answer", labelNames: ["service"])
    }

    package func retried(service: String) { self.retries.labels(service).increment() }

    package func rejected(service: String, outcome: String) { self.rejections.labels(service, outcome).increment() }

    package func breakerState(_ state: OutboundCircuitBreaker.State) { self.breaker.labels().set(state.gaugeValue) }

    /// The `outcome` label: the status of an answer, or the error code when none came.
    package static func outcome(_ result: Result<OutboundHTTPResponse, OutboundHTTPError>) -> String {
        switch result {
        case .success(let response): String(response.status)
        case .failure(let error): error.status.map(String.init) ?? error.stableCode
        }
    }

    package func record(
        service: String, result: Result<OutboundHTTPResponse, OutboundHTTPError>, nanoseconds: UInt64
    ) {
        self.requests.labels(service, Self.outcome(result)).increment()
        self.duration.labels(service).observe(nanoseconds: nanoseconds)
    }
}
