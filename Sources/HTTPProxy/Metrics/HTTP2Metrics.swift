package import GatewayIO

/// HTTP/2 on client listeners, and requests by protocol, so an operator sees the protocol mix
/// and what clients' streams cost.
///
/// - `attest_gateway_requests_by_protocol_total{protocol}`: `http/1.1` or `h2`, every request
///   answered (by the upstream or the gateway).
/// - `attest_gateway_http2_connections_total{mode}`: `tls` (ALPN h2) or `h2c` (prior knowledge).
/// - `attest_gateway_http2_streams_total`: request streams opened by clients.
/// - `attest_gateway_http2_resets_total{direction}`: RST_STREAM `sent` or `received`.
/// - `attest_gateway_http2_goaways_total{reason}`: GOAWAYs the gateway sent: `shutdown`,
///   `idle_timeout`, `protocol_error`, `flooded`, and the floods of `HTTP2FloodGuard`.
package final class HTTP2Metrics: Sendable {
    private let requestsByProtocol: CounterFamily
    package let http1Requests: Counter
    package let http2Requests: Counter
    private let connections: CounterFamily
    package let tlsConnections: Counter
    package let cleartextConnections: Counter
    package let streams: Counter
    private let resets: CounterFamily
    package let resetsSent: Counter
    package let resetsReceived: Counter
    private let goaways: CounterFamily

    package init(registry: MetricsRegistry) {
        self.requestsByProtocol = registry.counter(
            "attest_gateway_requests_by_protocol_total", help: "Requests answered, by client protocol (http/1.1, h2).",
            labelNames: ["protocol"])
        self.http1Requests = self.requestsByProtocol.labels("http/1.1")
        self.http2Requests = self.requestsByProtocol.labels("h2")
        self.connections = registry.counter(
            "attest_gateway_http2_connections_total",
            help: "Client connections that spoke HTTP/2, by mode (tls: ALPN h2, h2c: prior knowledge).",
            labelNames: ["mode"])
        self.tlsConnections = self.connections.labels("tls")
        self.cleartextConnections = self.connections.labels("h2c")
        self.streams = registry.counter(
            "attest_gateway_http2_streams_total", help: "HTTP/2 request streams opened by clients."
        ).labels()
        self.resets = registry.counter(
            "attest_gateway_http2_resets_total", help: "HTTP/2 RST_STREAM frames, by direction (sent, received).",
            labelNames: ["direction"])
        self.resetsSent = self.resets.labels("sent")
        self.resetsReceived = self.resets.labels("received")
        self.goaways = registry.counter(
            "attest_gateway_http2_goaways_total", help: "HTTP/2 GOAWAY frames the gateway sent, by reason.",
            labelNames: ["reason"])
    }

    package func goawaySent(reason: String) {
        self.goaways.labels(reason).increment()
    }
}
