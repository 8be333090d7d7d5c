package import GatewayIO

/// The HTTPS client's metrics, registered once per registry:
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

    package init(registry: MetricsRegistry) {
        self.requests = registry.counter(
            "attest_gateway_apple_requests_total", help: "Calls to Apple's servers by service and outcome",
            labelNames: ["service", "outcome"])
        self.duration = registry.histogram(
            "attest_gateway_apple_request_duration_seconds", help: "Latency of calls to Apple's servers",
            labelNames: ["service"], buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30])
        self.rejections = registry.counter(
            "attest_gateway_apple_requests_rejected_total",
            help: "Calls to Apple refused by the gateway (open breaker, rate limit)", labelNames: ["service", "reason"])
        self.breaker = registry.gauge(
            "attest_gateway_apple_breaker_state", help: "Circuit breaker towards Apple: 0 closed, 1 open, 2 half-open")
        self.retries = registry.counter(
            "attest_gateway_apple_retries_total",
            help: "Calls to Apple sent again after a 429, a 5xx or no answer", labelNames: ["service"])
    }

    func retried(service: String) { self.retries.labels(service).increment() }

    func rejected(service: String, outcome: String) { self.rejections.labels(service, outcome).increment() }

    func breakerState(_ state: AppleCircuitBreaker.State) { self.breaker.labels().set(state.gaugeValue) }

    /// `devicecheck` or `fraud_risk`, from the request's path.
    package static func service(path: String) -> String {
        path == "/v1/attestationData" ? "fraud_risk" : "devicecheck"
    }

    /// The `outcome` label: the status of an answer, or the error code when none came.
    package static func outcome(_ result: Result<AppleHTTPResponse, AppleError>) -> String {
        switch result {
        case .success(let response): String(response.status)
        case .failure(let error): error.status.map(String.init) ?? error.code.description
        }
    }

    func record(path: String, result: Result<AppleHTTPResponse, AppleError>, nanoseconds: UInt64) {
        let service = Self.service(path: path)
        self.requests.labels(service, Self.outcome(result)).increment()
        self.duration.labels(service).observe(nanoseconds: nanoseconds)
    }
}
