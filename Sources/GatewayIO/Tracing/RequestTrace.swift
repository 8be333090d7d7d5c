import Synchronization

/// One request's place in a trace, settled with its head (`Tracer.start`): the gateway's
/// server span, the parent it continues (an incoming `traceparent`) and the span ID of the
/// upstream exchange, whose ID the upstream sees in the `traceparent` the gateway forwards.
/// The gate's start and end times are noted as the request moves (monotonic ns, 0: not seen).
package struct RequestTrace: Sendable, Hashable {
    /// The server span: trace-id, span-id and the sampling decision.
    package var span: SpanContext
    /// The incoming parent's span-id, 0 when the gateway started the trace.
    package var parentSpanID: UInt64
    /// The upstream exchange's (client) span-id.
    package var upstreamSpanID: UInt64
    package var gateStart: UInt64 = 0
    package var gateEnd: UInt64 = 0

    package init(span: SpanContext, parentSpanID: UInt64, upstreamSpanID: UInt64) {
        self.span = span
        self.parentSpanID = parentSpanID
        self.upstreamSpanID = upstreamSpanID
    }

    /// The `traceparent` sent upstream: this trace, the upstream exchange's span, the decision.
    package var upstreamTraceparent: String {
        var context = self.span
        context.spanID = self.upstreamSpanID
        return context.traceparent
    }
}

/// The process's tracing switch and sampler, read by every request on every loop with one
/// relaxed atomic load, and the queue its sampled spans go to. `GatewayServe` configures it
/// at start and on each reload (`configure`); off until then, and off by default.
package final class Tracer: Sendable {
    /// The one tracer the proxy's connections use (like `RequestIDGenerator.processPrefix`,
    /// one per process); tests make their own.
    package static let process = Tracer()

    /// `state`: the sampler's threshold, or this when tracing is off.
    private static let off = UInt64.max
    private let state = Atomic<UInt64>(Tracer.off)
    private let sink = Mutex<SpanQueue?>(nil)
    package let ids: TraceIDSource

    package init(ids: TraceIDSource = TraceIDSource()) {
        self.ids = ids
    }

    /// Turns tracing on with `sampler`, sending ended spans to `queue`, or off (`nil`).
    package func configure(sampler: TraceSampler?, queue: SpanQueue?) {
        self.sink.withLock { $0 = queue }
        self.state.store(sampler?.threshold ?? Self.off, ordering: .relaxed)
    }

    package var isEnabled: Bool { self.state.load(ordering: .relaxed) != Self.off }

    /// The trace of a sampled request whose valid `traceparent` (if any) is `incoming`; nil when
    /// tracing is off or the request is not sampled (the caller's unsampled flag, or the ratio
    /// for a request that starts a trace). A nil trace leaves the request exactly as without
    /// tracing: an incoming `traceparent` goes upstream unchanged, none is added. So the
    /// requests not sampled cost one atomic load (plus, for a new trace, one ID draw).
    @inline(__always)
    package func start(incoming: String?) -> RequestTrace? {
        let threshold = self.state.load(ordering: .relaxed)
        guard threshold != Self.off else { return nil }
        return self.start(incoming: incoming, threshold: threshold)
    }

    private func start(incoming: String?, threshold: UInt64) -> RequestTrace? {
        if let incoming, let parent = SpanContext(traceparent: incoming) {
            guard parent.sampled else { return nil }
            let spanID = self.ids.next()
            return RequestTrace(
                span: SpanContext(
                    traceHigh: parent.traceHigh, traceLow: parent.traceLow, spanID: spanID, sampled: true),
                parentSpanID: parent.spanID, upstreamSpanID: TraceIDSource.mix(spanID) | 1)
        }
        let traceHigh = self.ids.next()
        let traceLow = TraceIDSource.mix(traceHigh)
        guard traceLow & (TraceSampler.randomSpan - 1) >= threshold else { return nil }
        let spanID = self.ids.next()
        return RequestTrace(
            span: SpanContext(traceHigh: traceHigh, traceLow: traceLow, spanID: spanID, sampled: true),
            parentSpanID: 0, upstreamSpanID: TraceIDSource.mix(spanID) | 1)
    }

    /// Hands a sampled request's spans to the export queue (dropped and counted when full).
    package func record(_ spans: [FinishedSpan]) {
        guard let queue = self.sink.withLock({ $0 }) else { return }
        queue.offer(spans)
    }
}
