package import HTTP1

// File length (~550 lines): every event handles every phase explicitly, so the
// switch over phase × event is long by design; splitting it would hide impossible combinations.

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
        /// The upstream's 101 answered the client's WebSocket upgrade: bytes are relayed both
        /// ways without parsing (`TunnelRelay`) until the tunnel ends, then the connection closes.
        case tunnelling
        /// Nothing more is read; output is flushed, then the connection closes.
        case closing
        /// Output is flushed and our side half-closed: what the client still sends is read and
        /// discarded until it closes or `Timer.linger` fires (a lingering close, as nginx does).
        case lingering
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
        /// Lingering after the response: close.
        case linger
        /// A tunnel's idle timeout or maximum lifetime, whichever comes first (`TunnelStateMachine`).
        case tunnel
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
        /// The TLS handshake with an `https://` upstream failed (always on a fresh connection,
        /// so it is never retried: the next connection would meet the same certificate).
        case tls(UpstreamTLSFailure)

        /// The answer when the failure ends the exchange.
        var error: ProxyError {
            switch self {
            case .unavailable: .upstreamUnavailable
            case .timeout: .upstreamTimeout
            case .invalidResponse: .upstreamInvalidResponse
            case .poolExhausted: .upstreamBusy
            case .tls(let failure): failure.error
            }
        }
    }

    package enum HeadAction: Sendable, Hashable {
        /// Call `decide` with the head only (the body, if any, streams afterwards).
        case decide
        /// Read the whole body first (send `100 Continue` first when `sendContinue`).
        case bufferBody(sendContinue: Bool)
        /// Call `decide` with an empty body: the request has none.
        case decideWithEmptyBody
        /// Answer locally without reading the body, then close.
        case reject(ProxyError)
    }

    package enum BodyAction: Sendable, Hashable {
        case keepReading
        case reject(ProxyError)
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
        case respond(ProxyError, keepAlive: Bool)
        /// A response already started: the client connection can only be closed.
        case abort
    }

    package enum TimeoutAction: Sendable, Hashable {
        case closeQuietly
        case respond(ProxyError)
        case abort
    }

    /// What holds for the current request from its head until its exchange ends; carried by
    /// the phases that have a request.
    package struct Request: Sendable, Hashable {
        /// The client allows keep-alive, and nothing (an unread body) forbids it.
        package var clientKeepAlive: Bool
        /// The parser reported the request's end (a request without body: at its head).
        package var complete: Bool
        package var responseStarted = false
        package var responseComplete = false
        package var expectsContinue: Bool
        package var continueSent = false
        /// The body is buffered for the gate, up to this many bytes (nil: streamed).
        package var bufferCap: Int?
        package var isIdempotent: Bool
        /// Already sent again once on a fresh upstream connection.
        package var retried = false
        /// A valid WebSocket upgrade on a route that allows it: only then may a 101 start a tunnel.
        package var asksUpgrade = false
    }

    /// The phase and the data only it has. `phase` is its name.
    private enum State: Sendable, Hashable {
        /// `headStarted`: bytes of the next head have arrived (the header timer instead of keep-alive).
        case idle(headStarted: Bool)
        /// `deadline`: monotonic ns by which the body must be complete (nil: none).
        case bufferingBody(Request, bufferedBytes: Int, deadline: UInt64?)
        case deciding(Request)
        case connecting(Request)
        case exchanging(Request)
        case respondingLocally(Request)
        case tunnelling
        /// `request` is nil when the connection closes between requests (a timer, end of file).
        case closing(Request?)
        case lingering
        case closed
    }

    private var state: State = .idle(headStarted: false)
    /// Shutdown: finish the current exchange, then close instead of keeping alive.
    package private(set) var isDraining = false
    package private(set) var requestCount = 0

    package init() {}

    package var phase: Phase {
        switch self.state {
        case .idle: .idle
        case .bufferingBody: .bufferingBody
        case .deciding: .deciding
        case .connecting: .connecting
        case .exchanging: .exchanging
        case .respondingLocally: .respondingLocally
        case .tunnelling: .tunnelling
        case .closing: .closing
        case .lingering: .lingering
        case .closed: .closed
        }
    }

    /// The current request, in the phases that have one.
    package var request: Request? {
        switch self.state {
        case .bufferingBody(let request, _, _), .deciding(let request), .connecting(let request),
            .exchanging(let request), .respondingLocally(let request):
            request
        case .closing(let request): request
        case .idle, .tunnelling, .lingering, .closed: nil
        }
    }

    /// Replaces the current request's data (in whichever phase carries it).
    private mutating func update(_ change: (inout Request) -> Void) {
        switch self.state {
        case .bufferingBody(var request, let bytes, let deadline):
            change(&request)
            self.state = .bufferingBody(request, bufferedBytes: bytes, deadline: deadline)
        case .deciding(var request):
            change(&request)
            self.state = .deciding(request)
        case .connecting(var request):
            change(&request)
            self.state = .connecting(request)
        case .exchanging(var request):
            change(&request)
            self.state = .exchanging(request)
        case .respondingLocally(var request):
            change(&request)
            self.state = .respondingLocally(request)
        case .closing(.some(var request)):
            change(&request)
            self.state = .closing(request)
        case .idle, .tunnelling, .closing(.none), .lingering, .closed:
            preconditionFailure("no request in phase \(self.phase)")
        }
    }

    package var requestComplete: Bool { self.request?.complete ?? false }
    package var responseStarted: Bool { self.request?.responseStarted ?? false }
    package var expectsContinue: Bool { self.request?.expectsContinue ?? false }
    package var continueSent: Bool { self.request?.continueSent ?? false }
    package var bufferCap: Int? { self.request?.bufferCap }

    /// Monotonic time (ns) by which the buffered body must be complete; it counts only in
    /// `.bufferingBody` (nil: no total deadline, e.g. the body is streamed).
    package var bufferedBodyDeadline: UInt64? {
        if case .bufferingBody(_, _, let deadline) = self.state { return deadline }
        return nil
    }

    /// The timer the connection should run now (nil: none).
    package var timer: Timer? {
        switch self.state {
        case .idle(let headStarted): return headStarted || self.requestCount == 0 ? .headerRead : .keepAliveIdle
        // The total deadline of a buffered body shortens this timer (`timerDelay`).
        case .bufferingBody: return .bodyReadIdle
        case .deciding: return .upstreamResponse
        case .connecting: return .upstreamConnect
        case .exchanging(let request): return request.complete ? .upstreamResponse : .bodyReadIdle
        case .respondingLocally, .closing: return .bodyReadIdle
        case .tunnelling: return .tunnel
        case .lingering: return .linger
        case .closed: return nil
        }
    }

    /// Whether the connection should parse request bytes now (upstream back-pressure aside).
    package var wantsRequestBytes: Bool {
        switch self.state {
        case .idle, .bufferingBody: return true
        case .exchanging(let request): return !request.complete
        case .deciding, .connecting, .respondingLocally, .tunnelling, .closing, .lingering, .closed: return false
        }
    }

    /// The first bytes of a head arrived (switches from the keep-alive to the header timer).
    package mutating func headBytesReceived() {
        switch self.state {
        case .idle: self.state = .idle(headStarted: true)
        case .bufferingBody, .deciding, .connecting, .exchanging, .respondingLocally, .tunnelling, .closing,
            .lingering, .closed:
            break
        }
    }

    package mutating func requestHeadReceived(
        method: String,
        framing: RequestBodyFraming,
        keepAlive: Bool,
        expectsContinue: Bool,
        bufferBodyUpTo cap: Int?,
        bufferedBodyDeadline: UInt64? = nil,
        refusal: ProxyError? = nil,
        asksUpgrade: Bool = false
    ) -> HeadAction {
        guard case .idle = self.state else { preconditionFailure("request head in phase \(self.phase)") }
        self.requestCount += 1
        let hasNoBody = framing == .none || framing == .contentLength(0)
        var request = Request(
            clientKeepAlive: keepAlive, complete: hasNoBody, expectsContinue: expectsContinue && !hasNoBody,
            bufferCap: cap, isIdempotent: Self.isIdempotent(method))
        request.asksUpgrade = asksUpgrade && hasNoBody
        if let refusal {
            // Refused from the head alone (a trusted proxy's ambiguous forwarding fields): the
            // body is not read and the peer is misbehaving, so the connection closes.
            request.clientKeepAlive = false
            self.state = .respondingLocally(request)
            return .reject(refusal)
        }
        guard let cap else {
            self.state = .deciding(request)
            return .decide
        }
        if hasNoBody {
            self.state = .deciding(request)
            return .decideWithEmptyBody
        }
        switch framing {
        case .contentLength(let length) where length > UInt64(cap):
            // The body is not read: the connection cannot be reused.
            request.clientKeepAlive = false
            self.state = .respondingLocally(request)
            return .reject(.bodyTooLarge(declared: length, cap: cap))
        case .none, .contentLength, .chunked:
            let sendContinue = request.expectsContinue
            request.continueSent = sendContinue
            self.state = .bufferingBody(request, bufferedBytes: 0, deadline: bufferedBodyDeadline)
            return .bufferBody(sendContinue: sendContinue)
        }
    }

    /// Body bytes were added to the buffer; `total` is the buffered size so far.
    package mutating func bufferedBodyReceived(total: Int) -> BodyAction {
        guard case .bufferingBody(var request, _, let deadline) = self.state else {
            preconditionFailure("buffered body in phase \(self.phase)")
        }
        if let cap = request.bufferCap, total > cap {
            request.clientKeepAlive = false
            self.state = .respondingLocally(request)
            return .reject(.bodyTooLarge(cap: cap))
        }
        self.state = .bufferingBody(request, bufferedBytes: total, deadline: deadline)
        return .keepReading
    }

    /// The process-wide budget for buffered bodies (`limits.max_buffered_body_bytes`) cannot
    /// hold this body (reserved whole for a Content-Length, as it arrives when chunked): 503
    /// without reading the rest, then close, as for 413. No `100 Continue` goes out first.
    package mutating func bodyBudgetExhausted() -> BodyAction {
        guard case .bufferingBody(var request, _, _) = self.state else {
            preconditionFailure("body budget in phase \(self.phase)")
        }
        request.clientKeepAlive = false
        request.continueSent = false
        self.state = .respondingLocally(request)
        return .reject(.bodyBudgetExhausted)
    }

    /// The parser reported the end of the request (body complete).
    package mutating func requestEnded() -> RequestEndAction {
        switch self.state {
        case .bufferingBody(var request, _, _):
            request.complete = true
            self.state = .deciding(request)
            return .decide
        case .exchanging(var request):
            request.complete = true
            self.state = .exchanging(request)
            return request.responseComplete ? .complete(keepAlive: self.keepAliveAfterResponse) : .none
        case .deciding, .connecting, .respondingLocally, .closing(.some):
            // Not parsing in these phases; recorded all the same.
            self.update { $0.complete = true }
            return .none
        case .idle, .tunnelling, .closing(.none), .lingering, .closed:
            preconditionFailure("request end in phase \(self.phase)")
        }
    }

    package mutating func decided(forward: Bool) -> DecisionAction {
        guard case .deciding(var request) = self.state else { preconditionFailure("decision in phase \(self.phase)") }
        if forward {
            let sendContinue = request.expectsContinue && !request.continueSent && !request.complete
            if sendContinue { request.continueSent = true }
            self.state = .connecting(request)
            return .connectUpstream(sendContinue: sendContinue)
        }
        // The unread body (a streamed route answered locally) would be taken for the next request.
        if !request.complete { request.clientKeepAlive = false }
        self.state = .respondingLocally(request)
        return .respondLocally(keepAlive: self.keepAliveAfterResponse)
    }

    /// An upstream connection is ready and the request head is being sent.
    package mutating func upstreamConnected() {
        guard case .connecting(let request) = self.state else {
            preconditionFailure("connected in phase \(self.phase)")
        }
        self.state = .exchanging(request)
    }

    /// The first byte of the response goes to the client (head or informational).
    package mutating func responseStartedSending() {
        self.update { $0.responseStarted = true }
    }

    /// The upstream finished its response. `upstreamKeepAlive`: its framing and headers allow reuse.
    package mutating func responseEnded(upstreamKeepAlive: Bool) -> ResponseEndAction {
        guard case .exchanging(var request) = self.state else {
            preconditionFailure("response end in phase \(self.phase)")
        }
        request.responseComplete = true
        // A connection whose request body was not fully sent is in an unknown state.
        if !request.complete {
            request.clientKeepAlive = false
            self.state = .closing(request)
            return .finishAndClose(reusable: false)
        }
        self.state = .exchanging(request)
        return .finish(reusable: upstreamKeepAlive, keepAlive: self.keepAliveAfterResponse)
    }

    /// The upstream answered 101. Returns true when the tunnel starts (phase `.tunnelling`): the
    /// request asked for that upgrade (`asksUpgrade`: a valid WebSocket upgrade on a
    /// `websocket: true` route, decided at its head), it was read to its end, and no final
    /// response came before. Otherwise nothing changes and the caller treats the 101 as an
    /// invalid response: a tunnel never starts after anything but the answer to its upgrade.
    package mutating func switchingProtocols() -> Bool {
        guard case .exchanging(let request) = self.state, request.asksUpgrade, request.complete,
            !request.responseComplete
        else { return false }
        self.state = .tunnelling
        return true
    }

    /// Whether the client response must say `Connection: close`.
    package var keepAliveAfterResponse: Bool {
        (self.request?.clientKeepAlive ?? false) && !self.isDraining
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
        var request: Request
        switch self.state {
        case .deciding(let current), .connecting(let current), .exchanging(let current): request = current
        case .idle, .bufferingBody, .respondingLocally, .tunnelling, .closing, .lingering, .closed:
            preconditionFailure("upstream failure in phase \(self.phase)")
        }
        if request.responseStarted {
            request.clientKeepAlive = false
            self.state = .closing(request)
            return .abort
        }
        if failure == .unavailable && !anyResponseByte && wasIdlePooledConnection && request.isIdempotent
            && requestReplayable && !request.retried
        {
            request.retried = true
            self.state = .connecting(request)
            return .retry
        }
        // Part of the request body may still be unread: the connection cannot continue then.
        if !request.complete { request.clientKeepAlive = false }
        self.state = .respondingLocally(request)
        return .respond(failure.error, keepAlive: self.keepAliveAfterResponse)
    }

    /// The request could not be parsed: answer with the parser's status and close.
    package mutating func requestInvalid() {
        var request =
            self.request
            ?? Request(
                clientKeepAlive: false, complete: false, expectsContinue: false, bufferCap: nil, isIdempotent: false)
        request.clientKeepAlive = false
        request.responseComplete = false
        self.state = .respondingLocally(request)
    }

    /// A local response (gate, error) is fully written to the output.
    /// Returns whether the connection continues with the next request.
    package mutating func localResponseWritten() -> Bool {
        guard case .respondingLocally(var request) = self.state else {
            preconditionFailure("local response in phase \(self.phase)")
        }
        request.responseComplete = true
        if request.clientKeepAlive && !self.isDraining && request.complete {
            self.state = .idle(headStarted: false)
            return true
        }
        self.state = .closing(request)
        return false
    }

    /// The exchange is over and the client connection continues: back to idle.
    package mutating func exchangeFinished(keepAlive: Bool) {
        self.state = keepAlive ? .idle(headStarted: false) : .closing(self.request)
    }

    /// How long from `now` the connection's timer runs, given `configured`, the duration set
    /// for `timer`. While a body is buffered: the earlier of the idle timeout and what is left
    /// of its total deadline (0 once that has passed).
    package func timerDelay(configured: UInt64, now: UInt64) -> UInt64 {
        guard case .bufferingBody(_, _, .some(let deadline)) = self.state else { return configured }
        return deadline > now ? min(configured, deadline - now) : 0
    }

    /// The timeout that fired at `now`: `timer`, or `.bufferedBody` when a buffered body's
    /// total deadline has passed.
    package func expiredTimer(at now: UInt64) -> Timer? {
        if case .bufferingBody(_, _, .some(let deadline)) = self.state, deadline <= now { return .bufferedBody }
        return self.timer
    }

    /// The timer fired at `now` (monotonic ns, the clock of `bufferedBodyDeadline`).
    package mutating func timerExpired(at now: UInt64) -> TimeoutAction {
        let expired = self.expiredTimer(at: now)
        var request = self.request
        request?.clientKeepAlive = false
        defer { self.state = .closing(request) }
        switch expired {
        case .keepAliveIdle, .linger, nil:
            return .closeQuietly
        case .headerRead:
            // Not a byte yet: nothing to answer (nginx closes silently too).
            guard case .idle(headStarted: true) = self.state else { return .closeQuietly }
            return .respond(.headTimeout)
        case .bodyReadIdle:
            switch self.state {
            case .respondingLocally, .closing: return .abort
            case .exchanging(let current) where current.responseStarted: return .abort
            case .idle, .bufferingBody, .deciding, .connecting, .exchanging, .tunnelling, .lingering, .closed:
                return .respond(.bodyIdleTimeout)
            }
        case .bufferedBody:
            // Only in `.bufferingBody`: nothing was answered yet.
            return .respond(.bufferedBodyTimeout)
        case .upstreamConnect, .upstreamResponse:
            if request?.responseStarted == true { return .abort }
            return .respond(.upstreamTimeout)
        case .tunnel:
            return .closeQuietly
        }
    }

    /// Shutdown began: the current exchange finishes with `Connection: close`.
    /// Returns true when the connection is idle between requests and can close now.
    package mutating func drain() -> Bool {
        self.isDraining = true
        return self.state == .idle(headStarted: false)
    }

    /// Output is flushed in `.closing` and the client has not closed its side: linger.
    package mutating func startLingering() {
        guard case .closing = self.state else { preconditionFailure("lingering in phase \(self.phase)") }
        self.state = .lingering
    }

    package mutating func closed() {
        self.state = .closed
    }

    package var isClosed: Bool { self.state == .closed }

    /// Closing after a request that was read to its end (head and whole body): unless it sent
    /// more after it (the caller checks), the client has nothing left to send.
    package var closingAfterCompleteRequest: Bool {
        if case .closing(let request?) = self.state { return request.complete }
        return false
    }

    /// GET, HEAD, OPTIONS, PUT, DELETE, TRACE (RFC 9110 §9.2.2). A switch: no hashing per request.
    static func isIdempotent(_ method: String) -> Bool {
        switch method {
        case "GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE": true
        default: false
        }
    }
}
