package import GatewayIO

/// The proxy's own metrics, registered once per registry.
package final class ProxyMetrics: Sendable {
    package let registry: MetricsRegistry
    /// `attest_gateway_requests_total{route, status}`: status is the class (`2xx`, `4xx`, ...).
    package let requests: CounterFamily
    /// `attest_gateway_upstream_errors_total{upstream, kind}`: kind is `unavailable`,
    /// `timeout`, `invalid_response`, `pool_exhausted` or `tls` (a failed upstream handshake).
    package let upstreamErrors: CounterFamily
    /// `attest_gateway_active_connections`: open client connections.
    package let activeConnections: Gauge
    /// `attest_gateway_connections_rejected_total`: closed at accept (max_connections reached).
    package let rejectedConnections: Counter
    /// `attest_gateway_request_duration_seconds{route}`: head received → response written.
    package let requestDuration: HistogramFamily
    /// `attest_gateway_upstream_duration_seconds{upstream}`: request sent → response complete.
    package let upstreamDuration: HistogramFamily
    /// `attest_gateway_buffered_body_bytes`: request-body bytes reserved in the process-wide
    /// budget (`limits.max_buffered_body_bytes`) now.
    package let bufferedBodyBytes: Gauge
    /// `attest_gateway_body_budget_rejections_total`: requests answered 503 `body_budget_exhausted`.
    package let bodyBudgetRejections: Counter
    /// `attest_gateway_limit_refusals_total{limit}`: shared with the gate's endpoint limit.
    package let limitRefusals: CounterFamily
    /// `attest_gateway_buffered_body_timeouts_total{route}`: buffered bodies answered 408
    /// because they missed `limits.buffered_body_timeout`.
    package let bufferedBodyTimeouts: CounterFamily
    /// `attest_gateway_tls_handshake_failures_total{reason}`: client connections closed before
    /// their TLS handshake finished; reason `timeout`, `client_certificate` (mTLS refused the
    /// client's certificate, or its absence) or `error` (bad ClientHello, protocol, cipher).
    package let tlsHandshakeFailures: CounterFamily
    /// `attest_gateway_tls_handshakes_total{protocol, resumed}`: completed client handshakes.
    package let tlsHandshakes: ListenerTLSHandshakeMetrics
    /// `attest_gateway_proxy_protocol_refusals_total{reason}`: connections on a
    /// `proxy_protocol: true` listener closed before HTTP or TLS because their PROXY header was
    /// missing, malformed, late or from a peer outside `trusted_proxies`
    /// (`ProxyProtocolPreamble.Refusal`).
    package let proxyProtocolRefusals: CounterFamily
    /// `attest_gateway_upstream_tls_handshakes_total{upstream, resumed}`: completed handshakes
    /// with `https://` upstreams; `resumed="true"` reused an earlier session (no certificate
    /// exchange), `"false"` was a full handshake.
    package let upstreamTLSHandshakes: CounterFamily
    /// `attest_gateway_upstream_tls_failures_total{upstream, reason}`: handshakes with
    /// `https://` upstreams that failed; reason `expired_certificate`, `hostname_mismatch`,
    /// `unknown_ca`, `certificate_not_yet_valid`, `verify_error_<n>`, `handshake` or `timeout`.
    package let upstreamTLSFailures: CounterFamily
    /// `attest_gateway_verdicts_total{route, verdict}`, the gate's family: the proxy counts the
    /// requests no gate decided (a head that did not parse, a body refused before `decide`).
    package let verdicts: CounterFamily
    /// `attest_gateway_refusals_total{route, code}`: requests the gateway answered itself with
    /// an error, by its stable code (the gate's, the proxy's or the parser's).
    package let refusals: CounterFamily
    /// WebSocket tunnels: open, bytes each way, closes by reason (`TunnelMetrics`).
    package let tunnels: TunnelMetrics
    /// HTTP/2 connections, streams, resets, GOAWAYs and requests by protocol (`HTTP2Metrics`).
    package let http2: HTTP2Metrics
    /// Connections and streams to h2/h2c upstreams (`HTTP2UpstreamMetrics`).
    package let http2Upstreams: HTTP2UpstreamMetrics

    /// The gate's help text and labels (`GatewayGateMetrics`): whichever registers first names the family.
    package static let verdictsHelp = "Requests decided by the App Attest gate, by route and verdict."

    package init(registry: MetricsRegistry) {
        self.registry = registry
        self.requests = registry.counter(
            "attest_gateway_requests_total", help: "Requests answered, by route and status class.",
            labelNames: ["route", "status"])
        self.upstreamErrors = registry.counter(
            "attest_gateway_upstream_errors_total", help: "Failed upstream exchanges, by upstream and kind.",
            labelNames: ["upstream", "kind"])
        self.activeConnections = registry.gauge(
            "attest_gateway_active_connections", help: "Open client connections."
        ).labels()
        self.rejectedConnections = registry.counter(
            "attest_gateway_connections_rejected_total",
            help: "Connections closed at accept because max_connections was reached."
        ).labels()
        self.requestDuration = registry.histogram(
            "attest_gateway_request_duration_seconds", help: "Time from request head to complete response, by route.",
            labelNames: ["route"])
        self.upstreamDuration = registry.histogram(
            "attest_gateway_upstream_duration_seconds",
            help: "Time from request sent upstream to complete response, by upstream.",
            labelNames: ["upstream"])
        self.bufferedBodyBytes = registry.gauge(
            "attest_gateway_buffered_body_bytes",
            help: "Request-body bytes held for verification now (limits.max_buffered_body_bytes caps it)."
        ).labels()
        self.bodyBudgetRejections = registry.counter(
            "attest_gateway_body_budget_rejections_total",
            help: "Requests answered 503 because buffered bodies reached limits.max_buffered_body_bytes."
        ).labels()
        self.limitRefusals = registry.counter(
            "attest_gateway_limit_refusals_total",
            help: "Requests refused by a per-client-address limit, by limit (never by address).",
            labelNames: ["limit"])
        self.bufferedBodyTimeouts = registry.counter(
            "attest_gateway_buffered_body_timeouts_total",
            help: "Buffered request bodies answered 408 because they missed limits.buffered_body_timeout, by route.",
            labelNames: ["route"])
        self.tlsHandshakeFailures = registry.counter(
            "attest_gateway_tls_handshake_failures_total",
            help:
                "Client connections closed before their TLS handshake finished, by reason (timeout, client_certificate, error).",
            labelNames: ["reason"])
        self.tlsHandshakes = ListenerTLSHandshakeMetrics(registry: registry)
        self.proxyProtocolRefusals = registry.counter(
            "attest_gateway_proxy_protocol_refusals_total",
            help: "Connections on a proxy_protocol listener closed because of their PROXY header, by reason.",
            labelNames: ["reason"])
        self.upstreamTLSHandshakes = registry.counter(
            "attest_gateway_upstream_tls_handshakes_total",
            help: "Completed TLS handshakes with https upstreams, by upstream and whether a session was resumed.",
            labelNames: ["upstream", "resumed"])
        self.verdicts = registry.counter(
            "attest_gateway_verdicts_total", help: Self.verdictsHelp, labelNames: ["route", "verdict"])
        self.refusals = registry.counter(
            "attest_gateway_refusals_total",
            help: "Requests the gateway answered itself with an error, by route and stable error code.",
            labelNames: ["route", "code"])
        self.upstreamTLSFailures = registry.counter(
            "attest_gateway_upstream_tls_failures_total",
            help: "Failed TLS handshakes with https upstreams, by upstream and reason.",
            labelNames: ["upstream", "reason"])
        self.tunnels = TunnelMetrics(registry: registry)
        self.http2 = HTTP2Metrics(registry: registry)
        self.http2Upstreams = HTTP2UpstreamMetrics(registry: registry)
    }

    static func statusClass(_ status: Int) -> Int {
        min(max(status / 100, 1), 5) - 1
    }

    static let statusClassNames = ["1xx", "2xx", "3xx", "4xx", "5xx"]
}

/// Per-loop cache of metric children by route/upstream, so that the hot path does one
/// dictionary lookup on loop-confined state instead of a locked label lookup.
/// Confined to one loop's queue.
final class ProxyMetricsCache {
    struct RouteHandles {
        let byStatusClass: [Counter]
        let duration: Histogram
    }

    let metrics: ProxyMetrics
    private var routes: [String: RouteHandles] = [:]
    private var upstreams: [String: Histogram] = [:]

    init(metrics: ProxyMetrics) {
        self.metrics = metrics
    }

    func route(_ name: String) -> RouteHandles {
        if let found = self.routes[name] { return found }
        let handles = RouteHandles(
            byStatusClass: ProxyMetrics.statusClassNames.map { self.metrics.requests.labels(name, $0) },
            duration: self.metrics.requestDuration.labels(name))
        if self.routes.count < 1024 { self.routes[name] = handles }
        return handles
    }

    /// A route and a code (or a verdict): the key of the per-loop caches below.
    struct LabelPair: Hashable {
        let first: String
        let second: String
    }

    private var verdicts: [LabelPair: Counter] = [:]
    private var refusals: [LabelPair: Counter] = [:]

    /// `attest_gateway_verdicts_total{route, verdict}` for a request no gate decided.
    func verdict(route: String, verdict: String) -> Counter {
        let key = LabelPair(first: route, second: verdict)
        if let found = self.verdicts[key] { return found }
        let counter = self.metrics.verdicts.labels(route, verdict)
        if self.verdicts.count < 1024 { self.verdicts[key] = counter }
        return counter
    }

    /// `attest_gateway_refusals_total{route, code}`. Codes are a closed set (docs/protocol.md),
    /// routes the policy's: the cache stays small, and only refused requests look it up.
    func refusal(route: String, code: String) -> Counter {
        let key = LabelPair(first: route, second: code)
        if let found = self.refusals[key] { return found }
        let counter = self.metrics.refusals.labels(route, code)
        if self.refusals.count < 4096 { self.refusals[key] = counter }
        return counter
    }

    func upstreamDuration(_ name: String) -> Histogram {
        if let found = self.upstreams[name] { return found }
        let histogram = self.metrics.upstreamDuration.labels(name)
        if self.upstreams.count < 1024 { self.upstreams[name] = histogram }
        return histogram
    }
}
