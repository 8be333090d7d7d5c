package import GatewayIO

/// Connections and streams to `protocol: h2`/`h2c` upstreams, so an operator sees how many
/// connections the pools hold, what they carry, and when an upstream sheds streams:
///
/// - `attest_gateway_http2_upstream_connections{upstream}`: connections open now (connecting
///   included).
/// - `attest_gateway_http2_upstream_connections_closed_total{upstream, reason}`: `idle_timeout`
///   (no stream for `upstreams.NAME.idle_timeout`), `goaway` (the upstream's GOAWAY, its streams
///   done), `drained` (reload or shutdown), `ping_timeout` (silent after a PING,
///   `upstreams.NAME.ping_interval`), `error` (reset, protocol error, end of file).
/// - `attest_gateway_http2_upstream_streams_total{upstream}`: streams opened.
/// - `attest_gateway_http2_upstream_goaways_total{upstream, code}`: GOAWAYs received, by error
///   code: `no_error`, `protocol_error`, `internal_error`, `enhance_your_calm`, `other`.
/// - `attest_gateway_http2_upstream_unprocessed_streams_total{upstream, reason}`: streams the
///   upstream did not process: `refused_stream` (RST_STREAM REFUSED_STREAM) or `goaway` (above
///   the GOAWAY's last stream ID).
/// - `attest_gateway_http2_upstream_retries_total{upstream}`: of those, sent again on another
///   connection (once each, only when no body byte had gone out).
package final class HTTP2UpstreamMetrics: Sendable {
    enum CloseReason: String, CaseIterable {
        case idleTimeout = "idle_timeout"
        case goaway
        case drained
        case pingTimeout = "ping_timeout"
        case error
    }

    enum GoAwayCode: String, CaseIterable {
        case noError = "no_error"
        case protocolError = "protocol_error"
        case internalError = "internal_error"
        case enhanceYourCalm = "enhance_your_calm"
        case other

        init(_ code: UInt32) {
            switch code {
            case HTTP2ErrorCode.noError.rawValue: self = .noError
            case HTTP2ErrorCode.protocolError.rawValue: self = .protocolError
            case HTTP2ErrorCode.internalError.rawValue: self = .internalError
            case HTTP2ErrorCode.enhanceYourCalm.rawValue: self = .enhanceYourCalm
            default: self = .other
            }
        }
    }

    enum UnprocessedReason: String, CaseIterable {
        case refusedStream = "refused_stream"
        case goaway
    }

    /// One upstream's children, looked up once per pool.
    struct Handles: Sendable {
        let connections: Gauge
        let closes: [CloseReason: Counter]
        let streams: Counter
        let goaways: [GoAwayCode: Counter]
        let unprocessed: [UnprocessedReason: Counter]
        let retries: Counter
    }

    private let connections: GaugeFamily
    private let closes: CounterFamily
    private let streams: CounterFamily
    private let goaways: CounterFamily
    private let unprocessed: CounterFamily
    private let retries: CounterFamily

    package init(registry: MetricsRegistry) {
        self.connections = registry.gauge(
            "attest_gateway_http2_upstream_connections", help: "Connections to h2/h2c upstreams open now, by upstream.",
            labelNames: ["upstream"])
        self.closes = registry.counter(
            "attest_gateway_http2_upstream_connections_closed_total",
            help: "Connections to h2/h2c upstreams closed, by upstream and reason.", labelNames: ["upstream", "reason"])
        self.streams = registry.counter(
            "attest_gateway_http2_upstream_streams_total", help: "Streams opened on h2/h2c upstreams, by upstream.",
            labelNames: ["upstream"])
        self.goaways = registry.counter(
            "attest_gateway_http2_upstream_goaways_total",
            help: "GOAWAY frames received from h2/h2c upstreams, by upstream and error code.",
            labelNames: ["upstream", "code"])
        self.unprocessed = registry.counter(
            "attest_gateway_http2_upstream_unprocessed_streams_total",
            help:
                "Streams an h2/h2c upstream did not process (REFUSED_STREAM, above a GOAWAY), by upstream and reason.",
            labelNames: ["upstream", "reason"])
        self.retries = registry.counter(
            "attest_gateway_http2_upstream_retries_total",
            help: "Unprocessed streams sent again on another connection, by upstream.", labelNames: ["upstream"])
    }

    func handles(upstream: String) -> Handles {
        var closes: [CloseReason: Counter] = [:]
        for reason in CloseReason.allCases { closes[reason] = self.closes.labels(upstream, reason.rawValue) }
        var goaways: [GoAwayCode: Counter] = [:]
        for code in GoAwayCode.allCases { goaways[code] = self.goaways.labels(upstream, code.rawValue) }
        var unprocessed: [UnprocessedReason: Counter] = [:]
        for reason in UnprocessedReason.allCases {
            unprocessed[reason] = self.unprocessed.labels(upstream, reason.rawValue)
        }
        return Handles(
            connections: self.connections.labels(upstream), closes: closes, streams: self.streams.labels(upstream),
            goaways: goaways, unprocessed: unprocessed, retries: self.retries.labels(upstream))
    }
}
