import GateContract
import GatewayIO
import Glibc
import HTTP1
import PolicyModel

/// One client connection: the thin I/O class that executes `ProxyConnectionStateMachine`.
///
/// Rooms: the client socket is a `SocketChannel` (its transport is plain TCP or TLS), the
/// upstream side an `UpstreamConnection` that reads and parses its own response and hands
/// the events over (`UpstreamLessee`); the current request lives in one `RequestExchange`
/// value, metrics and the access-log line in `ExchangeRecorder`. This file holds the events,
/// the pump, timers, output and the end of a connection; the request's path through the gate
/// is in `ProxyConnection+Request.swift`, the upstream exchange in `ProxyConnection+Upstream.swift`.
///
/// All work happens in `pump()`, which never nests: callbacks that arrive while it runs only
/// ask for another round (`repump`), so the loop's scratch buffer is never used by two parsers
/// at once. Output (client- and upstream-bound) is queued during a pass and flushed once at
/// its end.
///
/// Back-pressure: the client's body is not read while the upstream's unsent output is above
/// `highWaterMark`, and the upstream's response is not read while the client's unsent output
/// is above it; bodies therefore stream with bounded memory.
///
/// Confined to `loop` (hence `@unchecked Sendable`, needed for the gate's completion,
/// which hops back with `loop.execute`).
///
/// Stored properties are `@exclusivity(unchecked)` (here and in the other per-request classes:
/// `UpstreamConnection`, `SocketChannel`, `UpstreamPool`, `EventLoop`, `IOBuffer`, `LoopContext`):
/// they are used on one queue only and no method holds an `inout` access to one across a call
/// that uses it again (`pump()` never nests), so the runtime's dynamic checks (about 57 per
/// proxied request, ~85 instructions each: 9% of the gateway's user-space instructions) only cost.
final class ProxyConnection: EventHandler, UpstreamLessee, GateDecisionReceiver, @unchecked Sendable {
    static let highWaterMark = 256 * 1024
    /// Unparsed client bytes kept at most (pipelined requests, a paused body).
    static let maxBufferedInput = 256 * 1024
    /// How long a closing connection reads and discards what the client still sends.
    static let lingerNanoseconds: UInt64 = 2_000_000_000
    static let continueBytes: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
    /// `requestBytes` keeps its capacity between requests up to this (a head, not a body).
    static let retainedRequestBytesCapacity = 64 * 1024

    let client: SocketChannel
    let loop: EventLoop
    let loopContext: LoopContext
    let context: ListenerContext
    unowned let server: GatewayServer
    /// The client as this hop saw it: the socket peer, or the source a PROXY protocol header
    /// named (the balancer in between only relays bytes). `trusted_proxies` is decided on it.
    let peerAddress: String
    /// `peerAddress` as per-address limits count it (`IPAddressBytes.limitKey`).
    let peerLimitKey: String
    /// The peer as X-Forwarded-For and Forwarded name it; its trust and certificate subject
    /// are set per request (`prepareForwarding`).
    @exclusivity(unchecked) var forwardedClient: UpstreamRequestPlan.Client
    /// The transport was asked for a verified client certificate subject (once: it cannot change
    /// on a connection, renegotiation is off).
    @exclusivity(unchecked) var subjectResolved = false
    /// The TLS version ("TLSv1.3") on a TLS listener, for the access log; read with the subject.
    @exclusivity(unchecked) var tlsVersion: String?
    /// TLS listeners: how long the handshake may take (nanoseconds); nil for plain HTTP.
    let handshakeTimeout: UInt64?
    /// The client transport on a TLS listener (nil for plain HTTP): its handshake facts, and
    /// the loop's idle-buffer sweep after each event (`TLSIdleBufferSweep`).
    let tlsTransport: TLSTransport?
    @exclusivity(unchecked) private var handshakeTimerArmed = false
    /// The finished handshake has been counted (`attest_gateway_tls_handshakes_total`).
    @exclusivity(unchecked) var handshakeRecorded = false
    /// A plain listener's `http2: true`: a client may start with the HTTP/2 preface (h2c).
    let acceptsPriorKnowledgeHTTP2: Bool
    /// HTTP/1.1 or HTTP/2 is settled (ALPN, or the first bytes on an h2c listener).
    @exclusivity(unchecked) var protocolSettled = false
    /// The connection speaks HTTP/2: every event goes there (`ProxyConnection+HTTP2.swift`).
    @exclusivity(unchecked) var http2: HTTP2ServerConnection?

    @exclusivity(unchecked) var machine = ProxyConnectionStateMachine()
    @exclusivity(unchecked) var parser: HTTPRequestParser
    /// The parser still owes the `.end` of a request without body; it may come after the
    /// exchange ended (a local answer decided from the head alone).
    @exclusivity(unchecked) var parserOwesEnd = false
    @exclusivity(unchecked) var exchange: RequestExchange
    @exclusivity(unchecked) var recorder: ExchangeRecorder
    @exclusivity(unchecked) var upstream: UpstreamConnection?
    @exclusivity(unchecked) var waitingPool: UpstreamPool?
    /// The upstream request (head, then a buffered body), kept for a retry on a fresh connection.
    @exclusivity(unchecked) var requestBytes: [UInt8] = []
    /// The current request's decision, while the gate has it.
    @exclusivity(unchecked) var pendingDecision: GateDecisionPromise?
    /// From the upstream's 101 on (phase `.tunnelling`): the bytes both ways.
    @exclusivity(unchecked) var tunnel: TunnelRelay?
    @exclusivity(unchecked) private var pumping = false
    @exclusivity(unchecked) var repump = false
    /// The client closed, reset or stopped reading: a request cut short is its doing (499).
    @exclusivity(unchecked) private var clientWentAway = false
    @exclusivity(unchecked) private var timerKind: ProxyConnectionStateMachine.Timer?

    // Configuration snapshot (re-read when the listener's generation changes).
    @exclusivity(unchecked) var snapshot: ListenerContext.Snapshot
    @exclusivity(unchecked) private var snapshotGeneration: UInt64
    /// The snapshot's limits in nanoseconds, for the per-request timer updates.
    @exclusivity(unchecked) var timeouts: Timeouts
    /// Of the current snapshot (cleared when it changes).
    @exclusivity(unchecked) private var lastTarget: (name: String, target: UpstreamTarget)?

    struct Timeouts {
        var keepAliveIdle: UInt64
        var headerRead: UInt64
        var bodyReadIdle: UInt64
        var upstreamConnect: UInt64
        var upstreamResponse: UInt64
        var bufferedBody: UInt64

        init(_ limits: GatewayLimits) {
            self.keepAliveIdle = limits.keepAliveIdleTimeout.nanoseconds
            self.headerRead = limits.headerReadTimeout.nanoseconds
            self.bodyReadIdle = limits.bodyReadIdleTimeout.nanoseconds
            self.upstreamConnect = limits.upstreamConnectTimeout.nanoseconds
            self.upstreamResponse = limits.upstreamResponseTimeout.nanoseconds
            self.bufferedBody = limits.bufferedBodyTimeout.nanoseconds
        }
    }

    private init(
        transport: any ByteTransport, clientAddress: String, context: ListenerContext, loopContext: LoopContext,
        tls: ListenerTLS?, server: GatewayServer, acceptsPriorKnowledgeHTTP2: Bool
    ) {
        self.acceptsPriorKnowledgeHTTP2 = acceptsPriorKnowledgeHTTP2
        self.handshakeTimeout = tls?.handshakeTimeout.nanoseconds
        self.tlsTransport = transport as? TLSTransport
        self.client = SocketChannel(transport: transport, loop: loopContext.loop)
        self.loop = loopContext.loop
        self.loopContext = loopContext
        self.context = context
        self.server = server
        self.peerAddress = clientAddress
        self.peerLimitKey = IPAddressBytes.limitKey(clientAddress)
        self.exchange = RequestExchange(clientLimitKey: self.peerLimitKey, clientAddress: clientAddress)
        self.recorder = ExchangeRecorder(loopContext: loopContext)
        self.forwardedClient = UpstreamRequestPlan.Client(
            address: self.peerAddress, tlsEndedHere: transport is TLSTransport)
        if let tls { self.forwardedClient.subjectHeader = tls.clientSubjectHeader }
        self.snapshotGeneration = context.generation
        self.snapshot = context.snapshot
        self.forwardedClient.trustHeaders = self.snapshot.clientTrustHeaders
        self.timeouts = Timeouts(self.snapshot.limits)
        var parserLimits = HTTPParserLimits(
            maxHeaderBytes: self.snapshot.limits.maxHeaderBytes, maxHeaderCount: self.snapshot.limits.maxHeaderCount)
        // A check-only listener forwards nothing: the front proxy forwards the client's fields
        // itself, so dropping a `_` name here would hide it from the check and not from the
        // upstream. It keeps them, and `RequestRules` refuses the ones a CGI upstream would read
        // as a gateway or trust header.
        parserLimits.dropsUnderscoreFieldNames = !context.checkOnly
        self.parser = HTTPRequestParser(limits: parserLimits)
    }

    /// `clientAddress`: the socket peer's IP text, or the PROXY protocol header's source.
    static func start(
        transport: any ByteTransport, clientAddress: String, context: ListenerContext, loopContext: LoopContext,
        tls: ListenerTLS? = nil, server: GatewayServer, acceptsPriorKnowledgeHTTP2: Bool = false
    ) {
        loopContext.loop.assertInLoop()
        let connection = ProxyConnection(
            transport: transport, clientAddress: clientAddress, context: context, loopContext: loopContext, tls: tls,
            server: server, acceptsPriorKnowledgeHTTP2: acceptsPriorKnowledgeHTTP2)
        SystemCalls.setNoDelay(transport.fd)
        do {
            try connection.client.register(handler: connection)
        } catch {
            transport.close()
            server.connectionClosed(peerLimitKey: connection.peerLimitKey)
            return
        }
        loopContext.add(connection)
        if server.isDraining {
            // Accepted before the drain began, started on its loop after: a request may already
            // wait in the socket. As for a connection idle at the drain: read it and answer with
            // `Connection: close`, or close at once if nothing came (closing unread input is a
            // reset to the client).
            connection.beginDrain()
            return
        }
        connection.pump()
    }

    // MARK: - Events

    func handleEvents(_ events: UInt32) {
        self.loop.assertInLoop()
        if let http2 = self.http2 {
            http2.handleEvents(events)
            return
        }
        self.client.noteEvents(events)
        if events & (EventLoop.error | EventLoop.peerClosed) != 0 && self.machine.phase != .lingering
            && self.machine.phase != .tunnelling
        {
            // Reset, or both directions closed: no response can reach the client any more.
            self.clientGone("client reset or hung up")
            return
        }
        self.pump()
    }

    func handleDeadline() {
        self.loop.assertInLoop()
        if let http2 = self.http2 {
            http2.handleDeadline()
            return
        }
        switch self.machine.phase {
        case .closed:
            return
        case .lingering:
            self.close("linger deadline")
            return
        case .tunnelling:
            self.tunnelDeadlineFired()
            return
        case .idle where self.client.transport.isHandshaking:
            self.server.metrics.tlsHandshakeFailures.labels("timeout").increment()
            self.close("TLS handshake timeout")
            return
        case .connecting, .exchanging:
            let timer = self.machine.timer
            if timer == .upstreamConnect || timer == .upstreamResponse { self.countUpstreamError(.timeout) }
        case .idle, .bufferingBody, .deciding, .respondingLocally, .closing:
            break
        }
        let now = self.loop.now
        if self.machine.expiredTimer(at: now) == .bufferedBody { self.bufferedBodyTimedOut() }
        switch self.machine.timerExpired(at: now) {
        case .closeQuietly:
            self.close("keep-alive or header timer")
            return
        case .abort:
            self.abort("timer during a response")
            return
        case .respond(let error):
            if let upstream = self.upstream {
                self.releaseUpstream(upstream, reusable: false)
            }
            self.cancelWaiting()
            // A timeout before the gate decided is the proxy's refusal (after it, the gate's verdict stays).
            if self.exchange.logInfo == nil {
                self.exchange.proxyAnswered()
                self.exchange.logInfo = GateLogInfo(verdict: .rejected)
            }
            self.queueLocalResponse(error.response, keepAlive: false)
            self.finishRequest(keepAlive: false)
        }
        self.pump()
    }

    // MARK: - The pump

    func pump() {
        if self.pumping {
            self.repump = true
            return
        }
        self.pumping = true
        repeat {
            self.repump = false
            if self.machine.phase == .lingering {
                if !self.client.discardInput() { self.close("client closed while lingering") }
                break
            }
            if self.machine.phase == .tunnelling {
                self.relayTunnel()
                break
            }
            self.processClientInput()
            if self.http2 != nil { break }
            if let upstream = self.upstream, !self.machine.isClosed {
                upstream.relayResponse(to: self)
            }
            self.flushUpstream()
            self.flushClient()
        } while self.repump && !self.machine.isClosed
        self.pumping = false
        if let http2 = self.http2 {
            http2.pump()
            return
        }
        if let tlsTransport = self.tlsTransport { self.loopContext.tlsBufferSweep.note(tlsTransport) }
        switch self.machine.phase {
        case .closed, .lingering:
            return
        case .closing where !self.client.hasUnsentOutput:
            self.startClosing()
        case .idle, .bufferingBody, .deciding, .connecting, .exchanging, .respondingLocally, .tunnelling, .closing:
            self.updateTimer()
        }
    }

    /// Counts the handshake that just finished, by protocol and resumption.
    func recordHandshake() {
        self.handshakeRecorded = true
        guard let tls = self.tlsTransport else { return }
        self.server.metrics.tlsHandshakes.handshakeCompleted(protocol: tls.negotiatedProtocol, resumed: tls.isResumed)
    }

    private func updateTimer() {
        if let handshakeTimeout = self.handshakeTimeout, !self.handshakeRecorded {
            if self.client.transport.isHandshaking {
                // One deadline from accept for the whole handshake: trickling records do not extend it.
                if !self.handshakeTimerArmed {
                    self.handshakeTimerArmed = true
                    self.loop.setDeadline(token: self.client.token, after: handshakeTimeout)
                }
                return
            }
            self.recordHandshake()
        }
        let kind = self.machine.timer
        // The header timer is not refreshed by trickling bytes (slowloris).
        if kind == .headerRead && self.timerKind == .headerRead { return }
        self.timerKind = kind
        guard let kind else {
            self.loop.setDeadline(token: self.client.token, after: nil)
            return
        }
        let timeouts = self.timeouts
        let after: UInt64
        switch kind {
        case .keepAliveIdle: after = timeouts.keepAliveIdle
        case .headerRead: after = timeouts.headerRead
        case .bodyReadIdle, .bufferedBody:
            // A buffered body's total deadline may come first (`limits.buffered_body_timeout`).
            after = self.machine.timerDelay(configured: timeouts.bodyReadIdle, now: self.loop.now)
        case .upstreamConnect: after = self.exchange.target?.connectTimeoutNanoseconds ?? timeouts.upstreamConnect
        case .upstreamResponse: after = self.exchange.target?.responseTimeoutNanoseconds ?? timeouts.upstreamResponse
        case .linger: after = Self.lingerNanoseconds
        case .tunnel: after = self.tunnel?.nanosecondsToDeadline ?? 0
        }
        self.loop.setDeadline(token: self.client.token, after: after)
    }

    /// The snapshot's upstream named `name`; the last one again without a dictionary lookup.
    func upstreamTarget(_ name: String) -> UpstreamTarget? {
        if let cached = self.lastTarget, cached.name == name { return cached.target }
        guard let target = self.snapshot.upstreams.targets[name] else { return nil }
        self.lastTarget = (name, target)
        return target
    }

    func refreshSnapshot() {
        let generation = self.context.generation
        if generation != self.snapshotGeneration {
            self.snapshotGeneration = generation
            self.snapshot = self.context.snapshot
            // Set here, not per request: copying the lists would cost every request a retain.
            self.forwardedClient.trustHeaders = self.snapshot.clientTrustHeaders
            self.lastTarget = nil
            self.timeouts = Timeouts(self.snapshot.limits)
        }
    }

    // MARK: - Output

    func takeScratchBytes() -> [UInt8] {
        var bytes: [UInt8] = []
        swap(&bytes, &self.loopContext.scratchBytes)
        bytes.removeAll(keepingCapacity: true)
        return bytes
    }

    func returnScratchBytes(_ bytes: [UInt8]) {
        var bytes = bytes
        bytes.removeAll(keepingCapacity: true)
        self.loopContext.scratchBytes = bytes
    }

    func queueLocalResponse(_ response: LocalResponse, keepAlive: Bool) {
        self.exchange.responseStatus = response.status
        self.exchange.refusalCode = response.errorCode
        var bytes = self.takeScratchBytes()
        // HEAD: the Content-Length a GET would get, no body (RFC 9110 9.3.2).
        self.requestID.withUTF8 { requestID in
            HTTPSerializer.writeLocalResponse(
                status: response.status, headers: response.headers, body: response.body, keepAlive: keepAlive,
                omitBody: self.exchange.head?.method == "HEAD", requestID: requestID, into: &bytes)
        }
        self.client.queue(bytes)
        self.returnScratchBytes(bytes)
    }

    /// The exchange's request ID: set from the head (`requestHeadReceived`); an answer to a
    /// request whose head never parsed (invalid, timed out) gets a new one here.
    var requestID: RequestID {
        if let requestID = self.exchange.correlation?.requestID { return requestID }
        let requestID = self.loopContext.requestIDs.next()
        self.exchange.correlation = RequestCorrelation(requestID: requestID)
        return requestID
    }

    var clientIsBackedUp: Bool { self.client.unsentCount > Self.highWaterMark }

    private func flushClient() {
        guard self.client.hasUnsentOutput else { return }
        do {
            try self.client.flush { unsent in
                // Room again: the upstream may be read further.
                if unsent <= Self.highWaterMark && self.upstream?.channel.mayRead == true { self.repump = true }
            }
        } catch {
            self.clientGone("client write error")
        }
    }

    // MARK: - End of a request, end of the connection

    /// Access log, metrics, and the next request (or closing).
    func finishRequest(keepAlive: Bool) {
        self.server.metrics.http2.http1Requests.increment()
        self.releaseBodyReservation()
        // Moved out, not copied: the next exchange starts empty, the finished one is recorded.
        let queuedBytes = self.client.queuedBytes
        var finished = RequestExchange(
            clientLimitKey: self.peerLimitKey, clientAddress: self.peerAddress, queuedBytesAtStart: queuedBytes)
        swap(&finished, &self.exchange)
        self.recorder.exchangeFinished(
            finished, at: SystemCalls.monotonicNanoseconds(), bytesOut: queuedBytes &- finished.queuedBytesAtStart,
            tlsVersion: self.tlsVersion, keyIDFormat: self.snapshot.accessLogKeyID)
        // A buffered body went out through these bytes: do not keep its capacity for the
        // connection's lifetime (it is outside the budget once released).
        if self.requestBytes.capacity > Self.retainedRequestBytesCapacity { self.requestBytes = [] }
        self.machine.exchangeFinished(keepAlive: keepAlive)
        self.timerKind = nil
        if keepAlive { self.repump = true }
    }

    /// A request still in flight when the connection closes is logged and counted once, as
    /// nginx does and as an abandoned HTTP/2 stream is: 499 when the client went away first,
    /// 444 when the gateway closed (a shutdown that could not wait); the status already sent
    /// if the response had begun. Without this a cancelled request left no trace at all.
    private func recordUnfinishedExchange() {
        guard self.exchange.head != nil, self.machine.phase != .lingering else { return }
        if !self.clientWentAway { self.exchange.unansweredStatus = RequestExchange.closedWithoutResponseStatus }
        self.exchange.proxyAnswered()
        self.server.metrics.http2.http1Requests.increment()
        self.releaseBodyReservation()
        let queuedBytes = self.client.queuedBytes
        self.recorder.exchangeFinished(
            self.exchange, at: SystemCalls.monotonicNanoseconds(),
            bytesOut: queuedBytes &- self.exchange.queuedBytesAtStart, tlsVersion: self.tlsVersion,
            keyIDFormat: self.snapshot.accessLogKeyID)
        self.exchange.head = nil
    }

    /// Shutdown began: idle connections close now, busy ones after their response.
    func beginDrain() {
        self.loop.assertInLoop()
        if let http2 = self.http2 {
            http2.beginDrain()
            return
        }
        guard !self.machine.isClosed, self.machine.drain() else { return }
        // Idle, as far as this loop has seen; but a request may already wait unread in the
        // socket (its readiness not handled yet). Closing now would answer it with a reset:
        // read first, and a request found is served with `Connection: close`.
        self.pump()
        guard !self.machine.isClosed, self.machine.drain() else { return }
        if (self.client.input?.isEmpty ?? true) && !self.client.hasUnsentOutput {
            self.close("close after a half-closed client")
        }
    }

    /// Output is flushed and the connection must close: half-close our side and discard
    /// what the client still sends for a moment, so that it reads our response instead of
    /// a reset (lingering close, as nginx does).
    ///
    /// As nginx's `lingering_close on`, only when the client may still be sending: after a
    /// request read to its end with nothing behind it, the connection closes at once. Waiting
    /// for the client's FIN cost every `Connection: close` exchange one more wake-up of the
    /// loop (3.4 against nginx's 2.3 voluntary context switches per TLS full handshake).
    private func startClosing() {
        if self.client.readClosed {
            self.close("done")
            return
        }
        if let upstream = self.upstream { self.releaseUpstream(upstream, reusable: false) }
        self.cancelWaiting()
        if self.machine.closingAfterCompleteRequest && (self.client.input?.isEmpty ?? true) {
            switch self.client.discardPending() {
            case .nothing:
                // The receive queue is empty, so the close sends a FIN (after a TLS close_notify).
                self.client.shutdownOutput()
                self.close("done")
                return
            case .endOfFile:
                self.close("done")
                return
            case .discarded:
                break  // It is still sending: linger.
            }
        }
        self.machine.startLingering()
        self.client.shutdownOutput()
        self.updateTimer()
        if !self.client.discardInput() { self.close("client closed while lingering") }
    }

    func clientGone(_ why: String) {
        self.client.readClosed = true
        self.clientWentAway = true
        self.abort(why)
    }

    /// Something broke: close both sides now.
    func abort(_ why: String) {
        self.close("abort: " + why)
    }

    func forceClose() {
        if self.tunnel != nil {
            self.endTunnel(.shutdown)
            return
        }
        if let http2 = self.http2 {
            http2.close("shutdown")
            return
        }
        self.close("shutdown")
    }

    /// `ATTEST_GATEWAY_TRACE=1`: every connection close is logged with its reason (debugging).
    static let tracing = getenv("ATTEST_GATEWAY_TRACE") != nil

    func close(_ why: String) {
        guard !self.machine.isClosed else { return }
        if self.tunnel != nil {
            // Not through `endTunnel` (a failure elsewhere): the tunnel is counted and logged all the same.
            self.endTunnel(.error)
            return
        }
        if Self.tracing {
            Log.warning(
                "connection_closed",
                [
                    ("reason", why), ("phase", "\(self.machine.phase)"),
                    ("request_complete", "\(self.machine.requestComplete)"),
                ])
        }
        self.recordUnfinishedExchange()
        if let upstream = self.upstream {
            self.upstream = nil
            upstream.pool.release(upstream, reusable: false)
        }
        self.cancelWaiting()
        self.pendingDecision = nil
        self.exchange.bufferedBody = nil
        self.releaseBodyReservation()
        self.machine.closed()
        self.client.close()
        self.loopContext.remove(self)
        self.server.connectionClosed(peerLimitKey: self.peerLimitKey)
    }
}
