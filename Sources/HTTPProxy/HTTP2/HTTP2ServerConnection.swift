import GateContract
import GatewayIO
import HTTP1
import PolicyModel

/// A client connection that speaks HTTP/2 (ALPN `h2` on TLS, or `h2c` with prior knowledge on
/// a listener that allows it): an `HTTP2Session` (libnghttp2) driven from the connection's
/// socket on its loop, and one `HTTP2Stream` per request.
///
/// The `ProxyConnection` that accepted the socket stays its owner: it keeps the loop
/// registration, the connection counts and the PROXY/TLS facts, and hands every event to this
/// object once the protocol is known. Every stream then takes the path an HTTP/1.1 request
/// takes: `HTTP2RequestMapping` (HTTP/2's own rules) makes the `HTTPRequestHead`, then
/// `gate.classify` (RequestRules, routes, credentials), the body cap and budget, `gate.decide`
/// through a `GateDecisionPromise`, `UpstreamRequestPlan` and the `UpstreamPool`.
///
/// Back-pressure: request body bytes are acknowledged (WINDOW_UPDATE, `consume`) only once they
/// were forwarded with the upstream not backed up, or buffered within the budget; a stream's
/// upstream is read only while its response queue (`streamHighWaterMark`) and the
/// connection's output are short, and nghttp2 defers a stream with nothing queued. A slow
/// stream therefore holds its own upstream, never the others'.
///
/// Confined to the owner's loop; `pump` never nests (as `ProxyConnection.pump`).
///
/// Its rooms: this file holds the connection (events, the pump, client I/O, deadlines, the
/// end); `+RequestSide` the session's request callbacks (stream bookkeeping); `+Gate` a
/// stream through the gate; `+Upstream` a stream's upstream exchange; `+Response` the data
/// provider (response bytes within the client's window); `+Refusal` the gateway's own answers.
final class HTTP2ServerConnection: HTTP2SessionDelegate, @unchecked Sendable {
    /// A stream's response bytes queued at most before its upstream is no longer read.
    static let streamHighWaterMark = 64 * 1024
    /// Bytes nghttp2 may add to the client's output per pass (frames and DATA).
    static let sendChunk = 64 * 1024
    /// The HTTP/2 connection preface a prior-knowledge client starts with (RFC 9113 §3.4).
    static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    /// Request bodies buffered for the gate on one connection at most (every stream's together).
    static let maxBufferedBodyBytesPerConnection = 8 * 1024 * 1024

    /// At most one `http2_flood` line a second, process-wide.
    static let floodLog = LogThrottle(interval: .seconds(1))

    unowned let owner: ProxyConnection
    /// The owner's loop and socket (both `let` there), held here so that the pump and the
    /// callbacks do not reach them through `owner` (an unowned reference checked per access).
    let loop: EventLoop
    let client: SocketChannel
    var session: HTTP2Session!
    var streams = HTTP2StreamTable<HTTP2Stream>()
    var floodGuard = HTTP2FloodGuard()
    /// The header block being received (one at a time per connection), its storage reused.
    var headerBlock = HTTP2HeaderBlock()
    var recorder: ExchangeRecorder
    private var pumping = false
    /// A pass is queued for the end of the loop's batch (`pumpAtBatchEnd`).
    private var batchEndPumpQueued = false
    var repump = false
    /// The IDs of the streams whose HTTP/1.1 upstream may have work (`needsRelay`), each once
    /// (`HTTP2Stream.relayQueued`).
    private let relayQueue = BatchEndQueue<Int32>()
    private(set) var isClosed = false
    /// Closing after a GOAWAY: input is read and dropped (`closeAfterGoAway`).
    private var lingering = false
    /// The owner was told (`http2Closed`).
    private var finished = false
    /// A GOAWAY went out: no new streams; the connection closes once the last one ends.
    var goingAway = false
    /// Bytes read before the hand-over, fed to the session at the first pump.
    private var pendingInput: [UInt8]
    var bufferedBodyBytes = 0
    /// When the connection closes if no byte moves before (`idleTimeout` after the last).
    var idleDeadline: UInt64 = 0
    let metrics: HTTP2Metrics
    let mappingLimits: HTTP2RequestMapping.Limits

    init(owner: ProxyConnection, initialBytes: UnsafeRawBufferPointer, cleartext: Bool) {
        self.owner = owner
        self.loop = owner.loop
        self.client = owner.client
        self.recorder = ExchangeRecorder(loopContext: owner.loopContext)
        self.pendingInput = Array(initialBytes)
        self.metrics = owner.server.metrics.http2
        let limits = owner.snapshot.limits
        self.mappingLimits = HTTP2RequestMapping.Limits(
            maxFieldCount: limits.maxHeaderCount, maxHeaderListBytes: limits.maxHeaderBytes)
        let http2 = owner.snapshot.http2
        self.floodGuard = HTTP2FloodGuard(limits: HTTP2FloodGuard.Limits(policy: http2))
        self.session = HTTP2Session(delegate: self, settings: HTTP2Session.Settings(policy: http2, limits: limits))
        self.idleDeadline = owner.loop.now &+ owner.timeouts.keepAliveIdle
        (cleartext ? self.metrics.cleartextConnections : self.metrics.tlsConnections).increment()
    }

    var clientIsBackedUp: Bool { self.client.unsentCount > ProxyConnection.highWaterMark }

    // MARK: - Events from the owner

    func handleEvents(_ events: UInt32) {
        self.client.noteEvents(events)
        if self.lingering {
            if events & EventLoop.error != 0 || !self.client.discardInput() { self.finishClose("lingering ended") }
            return
        }
        if events & EventLoop.error != 0 {
            self.close("client reset")
            return
        }
        self.pump()
    }

    func handleDeadline() {
        if self.lingering {
            self.finishClose("linger deadline")
            return
        }
        guard !self.isClosed else { return }
        let now = self.loop.now
        for stream in self.streams.all where stream.upstreamDeadline != 0 && stream.upstreamDeadline <= now {
            self.upstreamTimedOut(stream)
        }
        for stream in self.streams.all where stream.bodyDeadline != 0 && stream.bodyDeadline <= now {
            self.bufferedBodyTimedOut(stream)
        }
        guard self.idleDeadline <= now else {
            self.pump()
            self.updateDeadline()
            return
        }
        // Idle without streams, or no byte moved for a whole timeout with streams open (a
        // zero-window stall, a client that stopped reading): the connection goes.
        self.sendGoAway(.noError, reason: "idle_timeout")
        self.flushOutput()
        self.close("http2 idle or stalled")
    }

    /// The stream's upstream did not connect or answer in time: its connection is not reused.
    func upstreamTimedOut(_ stream: HTTP2Stream) {
        stream.upstreamDeadline = 0
        if let upstream = stream.upstream {
            stream.upstream = nil
            upstream.pool.release(upstream, reusable: false)
        }
        if let pool = stream.waitingPool {
            pool.cancelWait(stream)
            stream.waitingPool = nil
        }
        self.releaseHTTP2Upstream(stream)
        self.countUpstreamError(.timeout, stream)
        if stream.phase == .responded {
            self.session.reset(stream.id, .internalError)
        } else {
            self.respondLocally(stream, ProxyError.upstreamTimeout.response)
        }
        self.repump = true
    }

    /// A body buffered for the gate missed `limits.buffered_body_timeout`: 408, as over HTTP/1.1
    /// (counted in `attest_gateway_buffered_body_timeouts_total`), so a trickling client cannot
    /// pin its share of the body budget.
    func bufferedBodyTimedOut(_ stream: HTTP2Stream) {
        stream.bodyDeadline = 0
        guard stream.phase == .bufferingBody else { return }
        self.owner.server.metrics.bufferedBodyTimeouts.labels(stream.exchange.classification?.routeName ?? "-")
            .increment()
        self.refuse(stream, ProxyError.bufferedBodyTimeout.response, verdict: .rejected)
        self.repump = true
    }

    /// Sets the stream's upstream deadline `after` nanoseconds from now (the target's timeouts).
    func armUpstreamDeadline(_ stream: HTTP2Stream, connecting: Bool) {
        let timeouts = self.owner.timeouts
        let after =
            connecting
            ? stream.exchange.target?.connectTimeoutNanoseconds ?? timeouts.upstreamConnect
            : stream.exchange.target?.responseTimeoutNanoseconds ?? timeouts.upstreamResponse
        stream.upstreamDeadline = max(self.loop.now &+ after, 1)
        if stream.grpcDeadline != 0 { stream.upstreamDeadline = min(stream.upstreamDeadline, stream.grpcDeadline) }
    }

    func beginDrain() {
        guard !self.isClosed else { return }
        self.sendGoAway(.noError, reason: "shutdown")
        self.pump()
    }

    // MARK: - The pump

    func pump() {
        guard !self.isClosed else { return }
        if self.pumping {
            self.repump = true
            return
        }
        self.pumping = true
        var progressed = false
        repeat {
            self.repump = false
            if !self.pendingInput.isEmpty {
                let input = self.pendingInput
                self.pendingInput = []
                progressed = true
                input.withUnsafeBytes { self.receive($0) }
            }
            if self.isClosed { break }
            progressed = self.readClient() || progressed
            if self.isClosed { break }
            self.relayUpstreams()
            if self.isClosed { break }
            progressed = self.flushOutput() || progressed
        } while self.repump && !self.isClosed
        self.pumping = false
        guard !self.isClosed else { return }
        if let tls = self.owner.tlsTransport { self.owner.loopContext.tlsBufferSweep.note(tls) }
        if self.session.isFinished || (self.goingAway && self.streams.isEmpty && !self.client.hasUnsentOutput) {
            self.close("http2 session finished")
            return
        }
        if progressed { self.idleDeadline = self.loop.now &+ self.idleTimeout }
        self.updateDeadline()
    }

    /// Every stream with an HTTP/1.1 upstream that may have work reads its response and writes its
    /// request body. Work for a stream begins only where `needsRelay` is called: its upstream
    /// socket reported an event, it was attached, request body bytes were queued for it, nghttp2
    /// took response bytes from it (room to read more). A stream that still has work after its
    /// visit (a readable upstream it could not read because the client is behind, request bytes
    /// not yet written, a window owed to the client) stays queued, so nothing waits on an event
    /// that already came. (Scanning every open stream instead cost ~3,000 instructions per
    /// request at 10 streams per connection: callgrind, issue 31's HTTP/2 row.) A relay may end
    /// streams: each is looked up by ID (`stream(_:)`: nil once it ended).
    private func relayUpstreams() {
        guard !self.relayQueue.isEmpty else { return }
        // One round: a stream queued again during it waits for the next pass.
        _ = self.relayQueue.run(rounds: 1) { id in
            guard let stream = self.stream(id) else { return }
            stream.relayQueued = false
            guard let upstream = stream.upstream else { return }
            upstream.relayResponse(to: stream)
            self.flushUpstream(stream)
            if let upstream = stream.upstream,
                upstream.channel.mayRead || upstream.channel.hasUnsentOutput || stream.owedWindow > 0
            {
                self.needsRelay(stream)
            }
        }
    }

    /// `stream`'s upstream may have work: the next pass visits it.
    func needsRelay(_ stream: HTTP2Stream) {
        guard !stream.relayQueued else { return }
        stream.relayQueued = true
        self.relayQueue.append(stream.id)
    }

    /// A pass once the loop has handled this turn's events (`LoopContext.pumpAtBatchEnd`): the
    /// upstream responses of one connection that arrive in one batch go out together, in one
    /// relay pass, one run of nghttp2's sender and one TLS write, as nginx posts its HTTP/2
    /// writes to the end of its event batch. (Pumping per upstream event wrote a TLS record per
    /// response: issue 31's HTTP/2 row.)
    func pumpAtBatchEnd() {
        guard !self.batchEndPumpQueued, !self.isClosed else { return }
        self.batchEndPumpQueued = true
        self.owner.loopContext.pumpAtBatchEnd(self)
    }

    func runPumpAtBatchEnd() {
        self.batchEndPumpQueued = false
        self.pump()
    }

    /// A pass after the callbacks of an HTTP/2 upstream, never nested in them: another round of
    /// the pass running now, else one at the end of the loop's batch.
    func schedulePump() {
        if self.pumping {
            self.repump = true
            return
        }
        self.pumpAtBatchEnd()
    }

    /// Reads and feeds the session while the socket has bytes and the client's output is not
    /// backed up (a client that does not read what it asks for gets nothing more read).
    func readClient() -> Bool {
        var progressed = false
        while self.client.mayRead && !self.client.readClosed && !self.clientIsBackedUp && !self.isClosed {
            let outcome: SocketChannel.ReadOutcome
            do {
                outcome = try self.client.readOnce()
            } catch {
                self.close("client read error")
                return progressed
            }
            switch outcome {
            case .wouldBlock:
                return progressed
            case .endOfFile:
                self.close("client closed")
                return progressed
            case .scratch(let bytes):
                progressed = true
                self.receive(bytes)
            case .appended:
                guard let input = self.client.input else { continue }
                progressed = true
                self.client.input = nil
                self.receive(input.readableBytes)
                input.consume(input.readableCount)
                self.loop.buffers.give(input)
            }
        }
        return progressed
    }

    func receive(_ bytes: UnsafeRawBufferPointer) {
        do {
            try self.session.receive(bytes)
        } catch {
            guard case .sessionEnded(let reason) = error else { return }
            // "stopped": the flood guard already counted its GOAWAY.
            let flood = reason == "flooded" || reason == "continuation_flood"
            // libnghttp2 queues its own GOAWAY for most fatal errors, not for all (too many
            // CONTINUATION frames): one is asked for here too; a second request is a no-op.
            if reason != "stopped" {
                self.metrics.goawaySent(reason: flood ? reason : "protocol_error")
                self.session.goAway(flood ? .enhanceYourCalm : .protocolError)
            }
            self.goingAway = true
            self.closeAfterGoAway("http2: " + reason)
        }
    }

    /// After a fatal error or a flood: the GOAWAY libnghttp2 queued is written, our side shut,
    /// and what the client still sends is read and dropped until its FIN or
    /// `ProxyConnection.lingerNanoseconds` (as the HTTP/1.1 side lingers), so that the client
    /// reads the GOAWAY instead of losing it to the reset a close with unread input makes.
    func closeAfterGoAway(_ why: String) {
        self.flushOutput()
        guard !self.isClosed else { return }
        self.isClosed = true
        self.abandonStreams()
        guard !self.client.hasUnsentOutput else {
            self.finishClose(why)
            return
        }
        self.lingering = true
        self.client.shutdownOutput()
        self.loop.setDeadline(token: self.client.token, after: ProxyConnection.lingerNanoseconds)
        if !self.client.discardInput() { self.finishClose(why) }
    }

    /// Queues what nghttp2 has to send and writes it. Returns whether any byte moved.
    @discardableResult
    func flushOutput() -> Bool {
        guard !self.isClosed else { return false }
        var moved = false
        // nghttp2's frames go straight into the socket's output buffer (no copy of our own).
        while !self.clientIsBackedUp {
            let sent: Int
            do {
                sent = try self.session.send(limit: Self.sendChunk) { self.client.queue($0) }
            } catch {
                self.close("http2 send failed")
                return moved
            }
            if sent == 0 { break }
            moved = true
        }
        guard self.client.hasUnsentOutput else { return moved }
        do {
            try self.client.flush { unsent in
                if unsent <= ProxyConnection.highWaterMark { self.repump = true }
            }
        } catch {
            self.close("client write error")
        }
        return moved
    }

    /// How long the connection may go without a byte moving: `keep_alive_timeout` without
    /// streams, else the larger of the upstream response and body read timeouts.
    private var idleTimeout: UInt64 {
        let timeouts = self.owner.timeouts
        return self.streams.isEmpty ? timeouts.keepAliveIdle : max(timeouts.upstreamResponse, timeouts.bodyReadIdle)
    }

    /// One loop deadline for the connection: the idle one or the earliest stream's upstream one.
    func updateDeadline() {
        var deadline = self.idleDeadline
        for stream in self.streams.all {
            if stream.upstreamDeadline != 0 { deadline = min(deadline, stream.upstreamDeadline) }
            if stream.bodyDeadline != 0 { deadline = min(deadline, stream.bodyDeadline) }
        }
        let now = self.loop.now
        self.loop.setDeadline(token: self.client.token, after: deadline > now ? deadline - now : 0)
    }

    func sendGoAway(_ code: HTTP2ErrorCode, reason: String) {
        guard !self.goingAway else { return }
        self.goingAway = true
        self.metrics.goawaySent(reason: reason)
        self.session.goAway(code)
    }

    /// Access log and metrics, once per stream.
    func record(_ stream: HTTP2Stream) {
        guard !stream.recorded, stream.exchange.head != nil || stream.exchange.responseStatus != 0 else { return }
        stream.recorded = true
        self.metrics.http2Requests.increment()
        self.releaseReservation(stream)
        self.recorder.exchangeFinished(
            stream.exchange, at: SystemCalls.monotonicNanoseconds(), bytesOut: stream.bytesOut,
            tlsVersion: self.owner.tlsVersion, keyIDFormat: self.owner.snapshot.accessLogKeyID, httpProtocol: "h2")
    }

    // MARK: - The end

    func close(_ why: String) {
        if self.lingering {
            self.finishClose(why)
            return
        }
        guard !self.isClosed else { return }
        self.isClosed = true
        self.abandonStreams()
        self.finishClose(why)
    }

    func finishClose(_ why: String) {
        guard !self.finished else { return }
        self.finished = true
        self.lingering = false
        self.owner.http2Closed(why)
    }

    /// Every stream's lease, wait and decision is let go; each is logged once.
    func abandonStreams() {
        for stream in self.streams.removeAll() {
            self.session.setStreamObject(stream.id, nil)
            stream.promise = nil
            if let upstream = stream.upstream {
                stream.upstream = nil
                upstream.pool.release(upstream, reusable: false)
            }
            if let pool = stream.waitingPool {
                pool.cancelWait(stream)
                stream.waitingPool = nil
            }
            self.releaseHTTP2Upstream(stream)
            self.record(stream)
        }
    }

    // MARK: - Streams by ID

    /// Opens `stream`: the table holds it, nghttp2's stream user data points at it (unretained:
    /// the table's reference keeps it alive, and `forget` clears the pointer before letting go).
    /// False if nghttp2 has no such stream.
    func adopt(_ stream: HTTP2Stream) -> Bool {
        guard self.session.setStreamObject(stream.id, Unmanaged.passUnretained(stream).toOpaque()) else {
            return false
        }
        self.streams.insert(stream)
        return true
    }

    /// The stream leaves the table; its user data is cleared first.
    func forget(_ stream: HTTP2Stream) {
        guard self.streams.contains(stream) else { return }
        self.session.setStreamObject(stream.id, nil)
        self.streams.remove(stream)
    }

    /// The open stream `streamID` (nghttp2's stream user data: no hashing), if it is one of ours.
    func stream(_ streamID: Int32) -> HTTP2Stream? {
        guard let object = self.session.streamObject(streamID) else { return nil }
        return Unmanaged<HTTP2Stream>.fromOpaque(object).takeUnretainedValue()
    }
}
