import GateContract
import GatewayIO
import HTTP1

/// What a finished exchange leaves behind: its route's request counter and latency, the
/// upstream's latency, and its access-log line. Keeps the last route's and upstream's metric
/// handles, since a keep-alive connection usually stays on one route (no dictionary lookup
/// per request). One per client connection, on its loop.
struct ExchangeRecorder {
    private let loopContext: LoopContext
    private var lastRoute: (name: String, handles: ProxyMetricsCache.RouteHandles)?
    private var lastUpstream: (name: String, histogram: Histogram)?

    init(loopContext: LoopContext) {
        self.loopContext = loopContext
    }

    /// The upstream's response ended `nanoseconds` after the request went to it.
    mutating func upstreamResponded(_ upstream: String, nanoseconds: UInt64) {
        if let cached = self.lastUpstream, cached.name == upstream {
            cached.histogram.observe(nanoseconds: nanoseconds)
            return
        }
        let histogram = self.loopContext.metricsCache.upstreamDuration(upstream)
        self.lastUpstream = (upstream, histogram)
        histogram.observe(nanoseconds: nanoseconds)
    }

    /// The exchange is over (answered by the upstream or the gateway, or abandoned).
    /// `bytesOut`: what was queued to the client for it; `tlsVersion`: the connection's, if TLS;
    /// `keyIDFormat`: the policy's `access_log.key_id`.
    mutating func exchangeFinished(
        _ exchange: borrowing RequestExchange, at now: UInt64, bytesOut: UInt64, tlsVersion: String?,
        keyIDFormat: AccessLogKeyIDFormat = .prefix, httpProtocol: String = "http/1.1"
    ) {
        let total = exchange.requestStart == 0 ? 0 : now &- exchange.requestStart
        let upstreamTime: UInt64? = exchange.upstreamStart == 0 ? nil : now &- exchange.upstreamStart
        let route = exchange.classification?.routeName ?? "-"
        let handles = self.routeHandles(route)
        handles.byStatusClass[ProxyMetrics.statusClass(exchange.loggedStatus)].increment()
        handles.duration.observe(nanoseconds: total)
        if !exchange.verdictCounted {
            // No gate was asked (the head did not parse, the proxy refused first): counted here,
            // so this request is in the verdicts as it is in the requests above.
            let verdict = exchange.logInfo?.verdict ?? .rejected
            self.loopContext.metricsCache.verdict(route: route, verdict: verdict.rawValue).increment()
        }
        if let code = exchange.refusalCode {
            self.loopContext.metricsCache.refusal(route: route, code: code).increment()
        }
        if exchange.correlation?.trace?.span.sampled == true {
            Tracer.process.record(
                ExchangeTracing.spans(
                    of: exchange, now: now, wallNow: ExchangeTracing.wallClockNanoseconds(), httpProtocol: httpProtocol)
            )
        }
        guard self.loopContext.accessLog != nil else { return }
        var entry =
            AccessLogBuffer.Entry(
                method: exchange.head?.method ?? exchange.refusedRequestLine?.method ?? "-",
                path: exchange.head?.path ?? exchange.refusedRequestLine?.path[...] ?? "-", route: route,
                status: exchange.loggedStatus, verdict: exchange.logInfo?.verdict.rawValue ?? "-",
                code: exchange.refusalCode,
                keyID: keyIDFormat.render(exchange.logInfo?.keyID), upstreamNanoseconds: upstreamTime,
                totalNanoseconds: total, arm: exchange.logInfo?.arm?.rawValue, client: exchange.clientAddress,
                requestID: exchange.correlation?.requestID, traceparent: exchange.correlation?.traceparent,
                userAgent: exchange.correlation?.userAgent, bytesIn: exchange.bodyBytesIn, bytesOut: bytesOut,
                upstreamAddress: upstreamTime == nil ? nil : exchange.target?.addressText, tlsVersion: tlsVersion)
        entry.httpProtocol = httpProtocol
        entry.platform = exchange.logInfo?.platform
        self.loopContext.logBuffer.append(entry)
    }

    private mutating func routeHandles(_ route: String) -> ProxyMetricsCache.RouteHandles {
        if let cached = self.lastRoute, cached.name == route { return cached.handles }
        let handles = self.loopContext.metricsCache.route(route)
        self.lastRoute = (route, handles)
        return handles
    }
}

@available(*, unavailable)
extension ExchangeRecorder: Sendable {}
