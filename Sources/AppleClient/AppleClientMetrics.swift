package import GatewayIO

/// The HTTPS client's metrics, registered once per registry (for Apple's client; Google's
/// client registers the same families as `attest_gateway_google_*`, services
/// `android_revocation`, …):
///
/// - `attest_gateway_apple_requests_total{service,outcome}`: every call, by service
///   (`devicecheck`, `fraud_risk`) and outcome (Apple's HTTP status, or the `AppleError` code
///   when there was no answer: `apple_timeout`, `apple_tls_failed`, `apple_unreachable`, …).
/// - `attest_gateway_apple_request_duration_seconds{service}`: time from queueing to the
///   outcome, answers and failures alike.
/// - `attest_gateway_apple_requests_rejected_total{service,reason}`: calls refused by the
///   gateway itself before reaching Apple (`breaker_open`, `rate_limited`).
/// - `attest_gateway_apple_retries_total{service}`: DeviceCheck calls sent again after a 429, a
///   5xx or no answer (`AppleRetryPolicy`).
/// - `attest_gateway_apple_breaker_state`: the circuit breaker, 0 closed, 1 open, 2 half-open.
package struct AppleClientMetrics: Sendable {
    package let requests: CounterFamily
    package let duration: HistogramFamily
    package let rejections: CounterFamily
    package let breaker: GaugeFamily
    package let retries: CounterFamily

    /// The metric name prefix of the client's families: Apple's client (the default) and
    /// Google's (`google`: `attest_gateway_google_requests_total`, …) count apart.
    package let peer: String

    /// - Parameter peer: `apple` (names `attest_gateway_apple_*`) or `google`
    ///   (`attest_gateway_google_*`): the same families for another client's calls.
    package init(registry: MetricsRegistry, peer: String = "apple") {
        self.peer = peer
        let prefix = "attest_gateway_\(peer)"
        let name = peer == "apple" ? "Apple" : peer.prefix(1).uppercased() + peer.dropFirst()
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

    func retried(service: String) { self.retries.labels(service).increment() }

    func rejected(service: String, outcome: String) { self.rejections.labels(service, outcome).increment() }

    func breakerState(_ state: AppleCircuitBreaker.State) { self.breaker.labels().set(state.gaugeValue) }

    /// `devicecheck` or `fraud_risk`, from the request's path.
    package static func service(path: String) -> String {
        path == "/v1/attestationData" ? "fraud_risk" : "devicecheck"
    }

    /// The request's own `service` label, else the one its Apple path implies.
    package static func service(of request: AppleHTTPRequest) -> String {
        request.service ?? Self.service(path: request.endpoint.path)
    }

    /// The `outcome` label: the status of an answer, or the error code when none came.
    package static func outcome(_ result: Result<AppleHTTPResponse, AppleError>) -> String {
        switch result {
        case .success(let response): String(response.status)
        case .failure(let error): error.status.map(String.init) ?? error.code.description
        }
    }

    func record(path: String, result: Result<AppleHTTPResponse, AppleError>, nanoseconds: UInt64) {
        self.record(service: Self.service(path: path), result: result, nanoseconds: nanoseconds)
    }

    func record(service: String, result: Result<AppleHTTPResponse, AppleError>, nanoseconds: UInt64) {
        self.requests.labels(service, Self.outcome(result)).increment()
        self.duration.labels(service).observe(nanoseconds: nanoseconds)
    }
}
