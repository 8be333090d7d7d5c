package import HTTP1

/// The life of one client connection, as a value: events in, actions out.
///
/// `ProxyConnection` (the I/O class) feeds it what happened on the sockets and the gate,
/// and executes the actions it returns; the machine decides the order of phases,
/// keep-alive, 100-continue, 413/408/502/504 answers, retries and which timer runs.
/// It holds no bytes and performs no I/O, so every path is tested without sockets
/// (`ProxyStateMachineTests`).
///
/// One request at a time: pipelined requests wait, unparsed, in the connection's input
/// until the current response is complete, so responses are sent in request order.
package struct ProxyConnectionStateMachine: Sendable {
    package enum Phase: Sendable, Hashable {
        /// Waiting for (the rest of) a request head.
        case idle
        /// Reading a body the gate must see before deciding.
        case bufferingBody
        /// `RequestGate.decide` is running.
        case deciding
        /// Waiting for an upstream connection (pool, connect).
        case connecting
        /// Request going upstream and/or response coming back.
        case exchanging
        /// Writing a response the gateway produced.
        case respondingLocally
        /// Nothing more is read; output is flushed, then the connection closes.
        case closing
        case closed
    }

    /// The one timer that runs in each phase.
    package enum Timer: Sendable, Hashable {
        /// Between requests, no byte of the next one yet: close quietly.
        case keepAliveIdle
        /// A head has started but is not complete (slowloris): 408.
        case headerRead
        /// The client pauses while sending a body: 408 (or abort once a response started).
        case bodyReadIdle
        /// A buffered body is not complete by its deadline (`limits.buffered_body_timeout` after
        /// its head): 408. Runs as `bodyReadIdle`, armed for the earlier of the two
        /// (`timerDelay`); `expiredTimer(at:)` tells which one fired.
        case bufferedBody
        /// Waiting for an upstream connection: 504.
        case upstreamConnect
        /// Waiting for the gate or the upstream's response: 504 (abort once it started).
        case upstreamResponse
    }

    /// Why the upstream exchange failed.
    package enum UpstreamFailure: Sendable, Hashable {
        /// Refused, unreachable, reset or closed before a complete response.
        case unavailable
        /// Connect or response timeout.
        case timeout
        /// The upstream sent something that is not HTTP/1.1.
        case invalidResponse
        /// Too many requests waiting for a pooled connection.
        case poolExhausted
    }

    package enum HeadAction: Sendable, Hashable {
        /// Call `decide` with the head only (the body, if any, streams afterwards).
        case decide
        /// Read the whole body first (send `100 Continue` first when `sendContinue`).
        case bufferBody(sendContinue: Bool)
        /// Call `decide` with an empty body: the request has none.
        case decideWithEmptyBody
        /// Answer locally without reading the body, then close.
        case reject(status: Int, code: String, message: String)
    }

    package enum BodyAction: Sendable, Hashable {
        case keepReading
        case reject(status: Int, code: String, message: String)
    }

    package enum RequestEndAction: Sendable, Hashable {
        /// Nothing to do yet (the response is still coming).
        case none
        /// The buffered body is complete: call `decide` with it.
        case decide
        /// Request and response both complete: finish the exchange.
        case complete(keepAlive: Bool)
    }

    package enum DecisionAction: Sendable, Hashable {
        /// Get an upstream connection; send `100 Continue` to the client first when asked.
        case connectUpstream(sendContinue: Bool)
        /// Write the gate's response; keep the connection only when `keepAlive`.
        case respondLocally(keepAlive: Bool)
    }

    package enum ResponseEndAction: Sendable, Hashable {
        /// Return the upstream connection to the pool (`reusable`) or close it; then, when
        /// `complete` is set, the exchange is over and the client connection continues
        /// (`keepAlive`) or closes.
        case finish(reusable: Bool, keepAlive: Bool)
        /// The response is complete but the client has not finished its body: close after flushing.
        case finishAndClose(reusable: Bool)
    }

    package enum FailureAction: Sendable, Hashable {
        /// Try once more on a fresh connection (idempotent request, idle pooled connection, no response byte).
        case retry
        /// Answer with this error, then continue (keepAlive) or close.
        case respond(status: Int, code: String, message: String, keepAlive: Bool)
        /// A response already started: the client connection can only be closed.
        case abort
    }

    package enum TimeoutAction: Sendable, Hashable {
        case closeQuietly
        case respond(status: Int, code: String, message: String)
        case abort
    }

    package private(set) var phase: Phase = .idle
    /// Bytes of the next request head have arrived (header timer instead of keep-alive timer).
    package private(set) var headStarted = false
    package private(set) var clientKeepAlive = true
    package private(set) var requestComplete = false
    package private(set) var responseStarted = false
    package private(set) var responseComplete = false
    package private(set) var expectsContinue = false
    package private(set) var continueSent = false
    package private(set) var bufferCap: Int?
    /// Monotonic time (ns) by which the buffered body must be complete; it counts only in
    /// `.bufferingBody` (nil: no total deadline, e.g. the body is streamed).
    package private(set) var bufferedBodyDeadline: UInt64?
    package private(set) var bufferedBytes = 0
    package private(set) var isIdempotent = false
    package private(set) var retried = false
    /// Shutdown: finish the current exchange, then close instead of keeping alive.
    package private(set) var isDraining = false
    package private(set) var requestCount = 0

    package init() {}

    /// The timer the connection should run now (nil: none).
    package var timer: Timer? {
        switch self.phase {
        case .idle: return self.headStarted || self.requestCount == 0 ? .headerRead : .keepAliveIdle
        // The total deadline of a buffered body shortens this timer (`timerDelay`).
        case .bufferingBody: return .bodyReadIdle
        case .deciding: return .upstreamResponse
        case .connecting: return .upstreamConnect
        case .exchanging: return self.requestComplete ? .upstreamResponse : .bodyReadIdle
        case .respondingLocally, .closing: return .bodyReadIdle
        case .closed: return nil
        }
    }

    /// Whether the connection should parse request bytes now (upstream back-pressure aside).
    package var wantsRequestBytes: Bool {
        switch self.phase {
        case .idle, .bufferingBody: return true
        case .exchanging: return !self.requestComplete
        case .deciding, .connecting, .respondingLocally, .closing, .closed: return false
        }
    }

    /// The first bytes of a head arrived (switches from the keep-alive to the header timer).
    package mutating func headBytesReceived() {
        if self.phase == .idle { self.headStarted = true }
    }

    package mutating func requestHeadReceived(
        method: String,
        framing: RequestBodyFraming,
        keepAlive: Bool,
        expectsContinue: Bool,
        bufferBodyUpTo cap: Int?,
        bufferedBodyDeadline: UInt64? = nil
    ) -> HeadAction {
        precondition(self.phase == .idle, "head in phase \(self.phase)")
        self.requestCount += 1
        self.headStarted = false
        self.clientKeepAlive = keepAlive
        let hasNoBody = framing == .none || framing == .contentLength(0)
        self.requestComplete = hasNoBody
        self.responseStarted = false
        self.responseComplete = false
        self.expectsContinue = expectsContinue && !hasNoBody
        self.continueSent = false
        self.bufferCap = cap
        self.bufferedBodyDeadline = cap == nil || hasNoBody ? nil : bufferedBodyDeadline
        self.bufferedBytes = 0
        self.retried = false
        self.isIdempotent = Self.isIdempotent(method)
        guard let cap else {
            self.phase = .deciding
            return .decide
        }
        if hasNoBody {
            self.phase = .deciding
            return .decideWithEmptyBody
        }
        switch framing {
        case .contentLength(let length) where length > UInt64(cap):
            // The body is not read: the connection cannot be reused.
            self.clientKeepAlive = false
            self.phase = .respondingLocally
            return .reject(
                status: 413, code: "body_too_large",
                message: "request body of \(length) bytes exceeds the route's limit of \(cap) bytes")
        case .none, .contentLength, .chunked:
            self.phase = .bufferingBody
            let sendContinue = self.expectsContinue
            self.continueSent = sendContinue
            return .bufferBody(sendContinue: sendContinue)
        }
    }

    /// Body bytes were added to the buffer; `total` is the buffered size so far.
    package mutating func bufferedBodyReceived(total: Int) -> BodyAction {
        self.bufferedBytes = total
        if let cap = self.bufferCap, total > cap {
            self.clientKeepAlive = false
            self.phase = .respondingLocally
            return .reject(
                status: 413, code: "body_too_large",
                message: "request body exceeds the route's limit of \(cap) bytes")
        }
        return .keepReading
    }

    /// The process-wide budget for buffered bodies (`limits.max_buffered_body_bytes`) cannot
    /// hold this body (reserved whole for a Content-Length, as it arrives when chunked): 503
    /// without reading the rest, then close, as for 413. No `100 Continue` goes out first.
    package mutating func bodyBudgetExhausted() -> BodyAction {
        precondition(self.phase == .bufferingBody, "body budget in phase \(self.phase)")
        self.clientKeepAlive = false
        self.continueSent = false
        self.phase = .respondingLocally
        return .reject(
            status: 503, code: "body_budget_exhausted",
            message: "the gateway is holding too many request bodies; retry later")
    }

    /// The parser reported the end of the request (body complete).
    package mutating func requestEnded() -> RequestEndAction {
        self.requestComplete = true
        switch self.phase {
        case .bufferingBody:
            self.phase = .deciding
            return .decide
        case .exchanging where self.responseComplete:
            return .complete(keepAlive: self.keepAliveAfterResponse)
        default:
            return .none
        }
    }

    package mutating func decided(forward: Bool) -> DecisionAction {
        precondition(self.phase == .deciding, "decision in phase \(self.phase)")
        if forward {
            self.phase = .connecting
            let sendContinue = self.expectsContinue && !self.continueSent && !self.requestComplete
            if sendContinue { self.continueSent = true }
            return .connectUpstream(sendContinue: sendContinue)
        }
        // The unread body (a streamed route answered locally) would be taken for the next request.
        if !self.requestComplete { self.clientKeepAlive = false }
        self.phase = .respondingLocally
        return .respondLocally(keepAlive: self.keepAliveAfterResponse)
    }

    /// An upstream connection is ready and the request head is being sent.
    package mutating func upstreamConnected() {
        precondition(self.phase == .connecting, "connected in phase \(self.phase)")
        self.phase = .exchanging
    }

    /// The first byte of the response goes to the client (head or informational).
    package mutating func responseStartedSending() {
        self.responseStarted = true
    }

    /// The upstream finished its response. `upstreamKeepAlive`: its framing and headers allow reuse.
    package mutating func responseEnded(upstreamKeepAlive: Bool) -> ResponseEndAction {
        self.responseComplete = true
        // A connection whose request body was not fully sent is in an unknown state.
        let reusable = upstreamKeepAlive && self.requestComplete
        if !self.requestComplete {
            self.clientKeepAlive = false
            self.phase = .closing
            return .finishAndClose(reusable: false)
        }
        return .finish(reusable: reusable, keepAlive: self.keepAliveAfterResponse)
    }

    /// Whether the client response must say `Connection: close`.
    package var keepAliveAfterResponse: Bool {
        self.clientKeepAlive && !self.isDraining
    }

    /// The upstream exchange failed. `wasIdlePooledConnection`: the failed connection had
    /// served a request before and waited idle in the pool; `requestReplayable`: the
    /// whole request is still held (no body, or a buffered body).
    package mutating func upstreamFailed(
        _ failure: UpstreamFailure,
        anyResponseByte: Bool,
        wasIdlePooledConnection: Bool,
        requestReplayable: Bool
    ) -> FailureAction {
        if self.responseStarted {
            self.phase = .closing
            self.clientKeepAlive = false
            return .abort
        }
        if failure == .unavailable && !anyResponseByte && wasIdlePooledConnection && self.isIdempotent
            && requestReplayable && !self.retried
        {
            self.retried = true
            self.phase = .connecting
            return .retry
        }
        // Part of the request body may still be unread: the connection cannot continue then.
        if !self.requestComplete { self.clientKeepAlive = false }
        self.phase = .respondingLocally
        switch failure {
        case .unavailable:
            return .respond(
                status: 502, code: "upstream_unavailable", message: "the upstream service is not reachable",
                keepAlive: self.keepAliveAfterResponse)
        case .timeout:
            return .respond(
                status: 504, code: "upstream_timeout", message: "the upstream service did not answer in time",
                keepAlive: self.keepAliveAfterResponse)
        case .invalidResponse:
            return .respond(
                status: 502, code: "upstream_invalid_response",
                message: "the upstream service sent an invalid response",
                keepAlive: self.keepAliveAfterResponse)
        case .poolExhausted:
            return .respond(
                status: 503, code: "upstream_busy", message: "too many requests are waiting for the upstream service",
                keepAlive: self.keepAliveAfterResponse)
        }
    }

    /// The request could not be parsed: answer with the parser's status and close.
    package mutating func requestInvalid() {
        self.clientKeepAlive = false
        self.responseComplete = false
        self.phase = .respondingLocally
    }

    /// A local response (gate, error) is fully written to the output.
    /// Returns whether the connection continues with the next request.
    package mutating func localResponseWritten() -> Bool {
        self.responseComplete = true
        if self.keepAliveAfterResponse && self.requestComplete {
            self.phase = .idle
            return true
        }
        self.phase = .closing
        return false
    }

    /// The exchange is over and the client connection continues: back to idle.
    package mutating func exchangeFinished(keepAlive: Bool) {
        self.phase = keepAlive ? .idle : .closing
    }

    /// How long from `now` the connection's timer runs, given `configured`, the duration set
    /// for `timer`. While a body is buffered: the earlier of the idle timeout and what is left
    /// of its total deadline (0 once that has passed).
    package func timerDelay(configured: UInt64, now: UInt64) -> UInt64 {
        guard self.phase == .bufferingBody, let deadline = self.bufferedBodyDeadline else { return configured }
        return deadline > now ? min(configured, deadline - now) : 0
    }

    /// The timeout that fired at `now`: `timer`, or `.bufferedBody` when a buffered body's
    /// total deadline has passed.
    package func expiredTimer(at now: UInt64) -> Timer? {
        if self.phase == .bufferingBody, let deadline = self.bufferedBodyDeadline, deadline <= now {
            return .bufferedBody
        }
        return self.timer
    }

    /// The timer fired at `now` (monotonic ns, the clock of `bufferedBodyDeadline`).
    package mutating func timerExpired(at now: UInt64) -> TimeoutAction {
        switch self.expiredTimer(at: now) {
        case .keepAliveIdle, nil:
            self.phase = .closing
            return .closeQuietly
        case .headerRead:
            self.phase = .closing
            self.clientKeepAlive = false
            // Not a byte yet: nothing to answer (nginx closes silently too).
            if !self.headStarted { return .closeQuietly }
            return .respond(status: 408, code: "request_timeout", message: "the request head did not arrive in time")
        case .bodyReadIdle:
            self.clientKeepAlive = false
            if self.responseStarted || self.phase == .respondingLocally || self.phase == .closing {
                self.phase = .closing
                return .abort
            }
            self.phase = .closing
            return .respond(status: 408, code: "request_timeout", message: "the request body did not arrive in time")
        case .bufferedBody:
            // Only in `.bufferingBody`: nothing was answered yet.
            self.clientKeepAlive = false
            self.phase = .closing
            return .respond(
                status: 408, code: "request_timeout",
                message: "the request body did not arrive within the time allowed for it")
        case .upstreamConnect, .upstreamResponse:
            if self.responseStarted {
                self.phase = .closing
                self.clientKeepAlive = false
                return .abort
            }
            if !self.requestComplete { self.clientKeepAlive = false }
            self.phase = .closing
            return .respond(
                status: 504, code: "upstream_timeout", message: "the upstream service did not answer in time")
        }
    }

    /// Shutdown began: the current exchange finishes with `Connection: close`.
    /// Returns true when the connection is idle between requests and can close now.
    package mutating func drain() -> Bool {
        self.isDraining = true
        return self.phase == .idle && !self.headStarted
    }

    package mutating func closed() {
        self.phase = .closed
    }

    /// GET, HEAD, OPTIONS, PUT, DELETE, TRACE (RFC 9110 §9.2.2). A switch: no hashing per request.
    static func isIdempotent(_ method: String) -> Bool {
        switch method {
        case "GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE": true
        default: false
        }
    }
}
