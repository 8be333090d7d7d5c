import GateContract
import GatewayIO
import HTTP1

/// What tracing adds to an exchange, kept out of the connection code: the `traceparent` the
/// upstream receives, and the spans an ended exchange leaves (`ExchangeRecorder` hands them
/// to `Tracer.process` when the request is sampled). Pure functions of the exchange.
///
/// Spans of one request (docs/operations.md "Traces"): the server span
/// (`{method} {route}`, kind SERVER, the incoming `traceparent`'s span as parent), a `gate`
/// span (INTERNAL, the gate's decision: from the call to `decide`, or the head when the proxy
/// did not note the call, to the decision) with, when the gate called the store for the key's
/// counter, a `store counter` span (CLIENT, `StoreCallSpan`) under it, and, when the request
/// went upstream, an `upstream` span (CLIENT) whose span-id the upstream sees in its
/// `traceparent`.
enum ExchangeTracing {
    /// The head and correlation the upstream request is written from. With a trace, the
    /// `traceparent` names the gateway's upstream span (any the client sent is replaced; its
    /// `tracestate` is kept only when its `traceparent` was valid, as without tracing);
    /// without one, both are returned unchanged.
    @inline(__always)
    static func upstream(
        _ head: HTTPRequestHead, _ correlation: RequestCorrelation
    ) -> (HTTPRequestHead, RequestCorrelation) {
        guard let trace = correlation.trace else { return (head, correlation) }
        return Self.rewrite(head, correlation, trace)
    }

    private static func rewrite(
        _ head: HTTPRequestHead, _ correlation: RequestCorrelation, _ trace: RequestTrace
    ) -> (HTTPRequestHead, RequestCorrelation) {
        var head = head
        var correlation = correlation
        let keepsTraceState = correlation.traceparent != nil
        head.headers.removeAll { field in
            switch HeaderRewriting.role(of: field.name) {
            case .traceparent: true
            case .tracestate: !keepsTraceState
            default: false
            }
        }
        let traceparent = trace.upstreamTraceparent
        head.headers.add(name: "traceparent", value: traceparent)
        correlation.traceparent = traceparent
        return (head, correlation)
    }

    /// The spans of a finished, sampled exchange; empty when it has no sampled trace.
    /// `now`: monotonic ns at the end; `wallNow`: the same instant in Unix ns.
    static func spans(
        of exchange: borrowing RequestExchange, now: UInt64, wallNow: UInt64, httpProtocol: String
    ) -> [FinishedSpan] {
        guard let trace = exchange.correlation?.trace, trace.span.sampled else { return [] }
        func wall(_ monotonic: UInt64) -> UInt64 {
            monotonic == 0 || monotonic > now ? wallNow : wallNow &- (now &- monotonic)
        }
        let start = exchange.requestStart == 0 ? now : exchange.requestStart
        let route = exchange.classification?.routeName ?? "-"
        let method = exchange.head?.method ?? exchange.refusedRequestLine?.method ?? "-"
        let status = exchange.responseStatus
        let verdict = exchange.logInfo?.verdict.rawValue ?? "-"
        var serverAttributes: [SpanAttribute] = [
            .string("http.request.method", method),
            .string("http.route", route),
            .string("network.protocol.name", "http"),
            .string("network.protocol.version", httpProtocol == "h2" ? "2" : "1.1"),
            .string("client.address", exchange.clientAddress),
            .string("attest_gateway.route", route),
            .string("attest_gateway.verdict", verdict),
        ]
        if status != 0 {
            serverAttributes.append(.int("http.response.status_code", status))
        } else {
            // No response began (OpenTelemetry: no status code then; `error.type` says why).
            let why =
                exchange.unansweredStatus == RequestExchange.clientClosedStatus
                ? "client_closed" : "closed_without_response"
            serverAttributes.append(.string("error.type", why))
        }
        if let code = exchange.refusalCode { serverAttributes.append(.string("attest_gateway.refusal_code", code)) }
        if let arm = exchange.logInfo?.arm {
            serverAttributes.append(.string("attest_gateway.rollout_arm", arm.rawValue))
        }
        if let requestID = exchange.correlation?.requestID {
            serverAttributes.append(.string("attest_gateway.request_id", requestID.text))
        }
        let span = trace.span
        var spans = [
            FinishedSpan(
                traceHigh: span.traceHigh, traceLow: span.traceLow, spanID: span.spanID,
                parentSpanID: trace.parentSpanID, parentIsRemote: trace.parentSpanID != 0,
                name: route == "-" ? method : "\(method) \(route)", kind: .server,
                startUnixNano: wall(start), endUnixNano: wallNow, attributes: serverAttributes,
                isError: status >= 500 || status == 0, statusMessage: exchange.refusalCode)
        ]
        if exchange.gateAsked || exchange.logInfo != nil {
            let gateStart = trace.gateStart != 0 ? trace.gateStart : start
            let gateEnd =
                trace.gateEnd != 0 ? trace.gateEnd : exchange.upstreamStart != 0 ? exchange.upstreamStart : now
            var attributes: [SpanAttribute] = [
                .string("attest_gateway.route", route), .string("attest_gateway.verdict", verdict),
            ]
            if exchange.upstreamStart == 0, let code = exchange.refusalCode {
                attributes.append(.string("attest_gateway.refusal_code", code))
            }
            let gateSpanID = TraceIDSource.mix(trace.upstreamSpanID)
            spans.append(
                FinishedSpan(
                    traceHigh: span.traceHigh, traceLow: span.traceLow, spanID: gateSpanID,
                    parentSpanID: span.spanID, name: "gate", kind: .internal, startUnixNano: wall(gateStart),
                    endUnixNano: wall(max(gateEnd, gateStart)), attributes: attributes))
            if let storeCall = exchange.logInfo?.storeCall {
                spans.append(
                    storeCall.finished(
                        traceHigh: span.traceHigh, traceLow: span.traceLow, gateSpanID: gateSpanID, wall: wall))
            }
        }
        if exchange.upstreamStart != 0 {
            var attributes: [SpanAttribute] = [
                .string("http.request.method", method),
                .int("http.response.status_code", status),
                .string("attest_gateway.upstream", exchange.classification?.upstream ?? "-"),
            ]
            if let address = exchange.target?.addressText { attributes.append(.string("server.address", address)) }
            spans.append(
                FinishedSpan(
                    traceHigh: span.traceHigh, traceLow: span.traceLow, spanID: trace.upstreamSpanID,
                    parentSpanID: span.spanID, name: "upstream", kind: .client,
                    startUnixNano: wall(exchange.upstreamStart), endUnixNano: wallNow, attributes: attributes,
                    isError: status >= 500 || status == 0))
        }
        return spans
    }

    /// The current wall-clock time in Unix ns.
    static func wallClockNanoseconds() -> UInt64 {
        let (seconds, nanoseconds) = SystemCalls.wallClock()
        return UInt64(max(seconds, 0)) &* 1_000_000_000 &+ UInt64(max(nanoseconds, 0))
    }
}
