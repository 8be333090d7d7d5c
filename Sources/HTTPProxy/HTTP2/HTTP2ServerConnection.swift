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
    private var session: HTTP2Session!
    private var streams: [Int32: HTTP2Stream] = [:]
    private var floodGuard = HTTP2FloodGuard()
    private var recorder: ExchangeRecorder
    private var output: [UInt8] = []
    private var pumping = false
    private var repump = false
    private(set) var isClosed = false
    /// Closing after a GOAWAY: input is read and dropped (`closeAfterGoAway`).
    private var lingering = false
    /// The owner was told (`http2Closed`).
    private var finished = false
    /// A GOAWAY went out: no new streams; the connection closes once the last one ends.
    private var goingAway = false
    /// Bytes read before the hand-over, fed to the session at the first pump.
    private var pendingInput: [UInt8]
    private var bufferedBodyBytes = 0
    /// When the connection closes if no byte moves before (`idleTimeout` after the last).
    private var idleDeadline: UInt64 = 0
    private let metrics: HTTP2Metrics
    private let mappingLimits: HTTP2RequestMapping.Limits

    init(owner: ProxyConnection, initialBytes: UnsafeRawBufferPointer, cleartext: Bool) {
        self.owner = owner
        self.recorder = ExchangeRecorder(loopContext: owner.loopContext)
        self.pendingInput = Array(initialBytes)
        self.metrics = owner.server.metrics.http2
        let limits = owner.snapshot.limits
        self.mappingLimits = HTTP2RequestMapping.Limits(
            maxFieldCount: limits.maxHeaderCount, maxHeaderListBytes: limits.maxHeaderBytes)
        var settings = HTTP2Session.Settings()
        settings.maxHeaderListSize = UInt32(limits.maxHeaderBytes + 32 * limits.maxHeaderCount)
        self.session = HTTP2Session(delegate: self, settings: settings)
        self.idleDeadline = owner.loop.now &+ owner.timeouts.keepAliveIdle
        (cleartext ? self.metrics.cleartextConnections : self.metrics.tlsConnections).increment()
    }

    var loop: EventLoop { self.owner.loop }
    var client: SocketChannel { self.owner.client }
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
        for stream in Array(self.streams.values) where stream.upstreamDeadline != 0 && stream.upstreamDeadline <= now {
            self.upstreamTimedOut(stream)
        }
        for stream in Array(self.streams.values) where stream.bodyDeadline != 0 && stream.bodyDeadline <= now {
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
    private func upstreamTimedOut(_ stream: HTTP2Stream) {
        stream.upstreamDeadline = 0
        if let upstream = stream.upstream {
            stream.upstream = nil
            upstream.pool.release(upstream, reusable: false)
        }
        if let pool = stream.waitingPool {
            pool.cancelWait(stream)
            stream.waitingPool = nil
        }
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
    private func bufferedBodyTimedOut(_ stream: HTTP2Stream) {
        stream.bodyDeadline = 0
        guard stream.phase == .bufferingBody else { return }
        self.owner.server.metrics.bufferedBodyTimeouts.labels(stream.exchange.classification?.routeName ?? "-")
            .increment()
        self.refuse(stream, ProxyError.bufferedBodyTimeout.response, verdict: .rejected)
        self.repump = true
    }

    /// Sets the stream's upstream deadline `after` nanoseconds from now (the target's timeouts).
    private func armUpstreamDeadline(_ stream: HTTP2Stream, connecting: Bool) {
        let timeouts = self.owner.timeouts
        let after =
            connecting
            ? stream.exchange.target?.connectTimeoutNanoseconds ?? timeouts.upstreamConnect
            : stream.exchange.target?.responseTimeoutNanoseconds ?? timeouts.upstreamResponse
        stream.upstreamDeadline = max(self.loop.now &+ after, 1)
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
            for stream in Array(self.streams.values) {
                guard let upstream = stream.upstream else { continue }
                upstream.relayResponse(to: stream)
                self.flushUpstream(stream)
            }
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

    /// Reads and feeds the session while the socket has bytes and the client's output is not
    /// backed up (a client that does not read what it asks for gets nothing more read).
    private func readClient() -> Bool {
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

    private func receive(_ bytes: UnsafeRawBufferPointer) {
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
    private func closeAfterGoAway(_ why: String) {
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
    private func flushOutput() -> Bool {
        guard !self.isClosed else { return false }
        var moved = false
        while !self.clientIsBackedUp {
            self.output.removeAll(keepingCapacity: true)
            do {
                try self.session.send(into: &self.output, limit: Self.sendChunk)
            } catch {
                self.close("http2 send failed")
                return moved
            }
            if self.output.isEmpty { break }
            moved = true
            self.output.withUnsafeBytes { self.client.queue($0) }
        }
        if self.output.capacity > 256 * 1024 { self.output = [] }
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
    private func updateDeadline() {
        var deadline = self.idleDeadline
        for stream in self.streams.values {
            if stream.upstreamDeadline != 0 { deadline = min(deadline, stream.upstreamDeadline) }
            if stream.bodyDeadline != 0 { deadline = min(deadline, stream.bodyDeadline) }
        }
        let now = self.loop.now
        self.loop.setDeadline(token: self.client.token, after: deadline > now ? deadline - now : 0)
    }

    private func sendGoAway(_ code: HTTP2ErrorCode, reason: String) {
        guard !self.goingAway else { return }
        self.goingAway = true
        self.metrics.goawaySent(reason: reason)
        self.session.goAway(code)
    }

    // MARK: - HTTP2SessionDelegate: the request side

    func http2StreamOpened(_ streamID: Int32) {
        guard !self.goingAway else {
            self.session.reset(streamID, .refusedStream)
            return
        }
        self.metrics.streams.increment()
        self.owner.refreshSnapshot()
        let exchange = RequestExchange(clientLimitKey: self.owner.peerLimitKey, clientAddress: self.owner.peerAddress)
        let stream = HTTP2Stream(
            id: streamID, connection: self, exchange: exchange, client: self.owner.forwardedClient)
        stream.exchange.requestStart = SystemCalls.monotonicNanoseconds()
        self.streams[streamID] = stream
    }

    func http2Field(_ streamID: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool {
        guard let stream = self.streams[streamID] else { return true }
        guard stream.phase == .head else { return true }  // request trailers: not forwarded
        stream.fieldBytes += name.count + value.count + 32
        // Kept up to one field past the mapping's limits, so that the mapping refuses the block
        // with its code; the rest is not held (an HPACK bomb decodes into nothing kept).
        if stream.fieldsOverflowed { return true }
        if stream.fields.count > self.mappingLimits.maxFieldCount
            || stream.fieldBytes > self.mappingLimits.maxHeaderListBytes + name.count + value.count + 32
        {
            stream.fieldsOverflowed = true
            return true
        }
        stream.fields.append(HTTP2HeaderField(name: Array(name), value: Array(value)))
        return true
    }

    func http2HeadersEnded(_ streamID: Int32, endStream: Bool) {
        guard let stream = self.streams[streamID], stream.phase == .head else { return }
        stream.requestEnded = endStream
        let fields = stream.fields
        stream.fields = []
        switch HTTP2RequestMapping.map(fields, limits: self.mappingLimits) {
        case .failure(let error):
            stream.isGRPCGuess = fields.contains {
                $0.name == Array("content-type".utf8) && $0.value.starts(with: Array("application/grpc".utf8))
            }
            stream.phase = .responded
            self.answerLocally(
                stream,
                .jsonError(
                    status: error.status, code: error.code.rawValue,
                    message: "the request is not valid HTTP/2 (\(error.code.rawValue))"),
                verdict: .malformed)
        case .success(let mapped):
            self.requestReceived(stream, mapped)
        }
    }

    func http2TrailersEnded(_ streamID: Int32) {
        self.http2DataEnded(streamID)
    }

    func http2Data(_ streamID: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let stream = self.streams[streamID] else {
            self.session.consume(streamID, bytes.count)
            return
        }
        stream.bodyBytesReceived &+= UInt64(bytes.count)
        stream.exchange.bodyBytesIn &+= UInt64(bytes.count)
        if let declared = stream.mapped?.contentLength, stream.bodyBytesReceived > declared {
            self.contentLengthMismatch(stream)
            self.session.consume(streamID, bytes.count)
            return
        }
        switch stream.phase {
        case .head, .responded:
            self.session.consume(streamID, bytes.count)
        case .bufferingBody:
            let total = (stream.exchange.bufferedBody?.count ?? 0) + bytes.count
            if let cap = stream.exchange.classification?.bufferBodyUpTo, total > cap {
                self.refuse(stream, ProxyError.bodyTooLarge(cap: cap).response, verdict: .rejected)
                self.session.consume(streamID, bytes.count)
                return
            }
            guard self.reserve(stream, total) else {
                self.session.consume(streamID, bytes.count)
                return
            }
            stream.exchange.bufferedBody?.append(contentsOf: bytes)
            self.session.consume(streamID, bytes.count)
        case .deciding, .connecting:
            stream.heldBody.append(contentsOf: bytes)
        case .exchanging:
            self.forwardBody(stream, bytes)
        }
    }

    func http2DataEnded(_ streamID: Int32) {
        guard let stream = self.streams[streamID], !stream.requestEnded else { return }
        stream.requestEnded = true
        if let declared = stream.mapped?.contentLength, stream.bodyBytesReceived != declared,
            stream.phase != .responded
        {
            self.contentLengthMismatch(stream)
            return
        }
        switch stream.phase {
        case .bufferingBody:
            self.callDecide(stream, body: stream.exchange.bufferedBody ?? [])
        case .exchanging:
            if stream.exchange.requestEncoding == .chunked, let upstream = stream.upstream {
                var framing: [UInt8] = []
                HTTPSerializer.writeLastChunk(trailers: nil, into: &framing)
                upstream.send(framing)
            }
        case .head, .deciding, .connecting, .responded:
            break
        }
    }

    func http2StreamClosed(_ streamID: Int32, errorCode: UInt32) {
        guard let stream = self.streams.removeValue(forKey: streamID) else { return }
        stream.promise = nil
        if let upstream = stream.upstream {
            stream.upstream = nil
            // Still attached: its response was not read to the end, so it carries no other request.
            upstream.pool.release(upstream, reusable: false)
        }
        if let pool = stream.waitingPool {
            pool.cancelWait(stream)
            stream.waitingPool = nil
        }
        self.record(stream)
        self.repump = true
    }

    func http2FrameReceived(_ kind: HTTP2FrameKind, streamID: Int32, flags: UInt8, length: Int) -> Bool {
        if kind == .rstStream { self.metrics.resetsReceived.increment() }
        let isAck = flags & 0x1 != 0 && (kind == .ping || kind == .settings)
        guard let flood = self.floodGuard.received(kind, isAck: isAck, length: length, at: self.loop.now) else {
            return true
        }
        guard !self.goingAway else { return false }
        self.goingAway = true
        self.metrics.goawaySent(reason: flood.rawValue)
        self.session.goAway(.enhanceYourCalm)
        if let suppressed = Self.floodLog.admit() {
            Log.info(
                "http2_flood",
                [("client", self.owner.peerAddress), ("flood", flood.rawValue), ("suppressed", String(suppressed))])
        }
        return false
    }

    func http2FrameSent(_ kind: HTTP2FrameKind, streamID: Int32, flags: UInt8, errorCode: UInt32) {
        if kind == .rstStream { self.metrics.resetsSent.increment() }
        // The whole response is out while the client is still sending its request (a refusal
        // before the body ended, an upstream that answered early): RST_STREAM NO_ERROR tells it
        // to stop (RFC 9113 §8.1), and the stream does not stay open to hold a drain.
        if kind == .data || kind == .headers, flags & 0x1 != 0, let stream = self.streams[streamID],
            !stream.requestEnded
        {
            self.session.reset(streamID, .noError)
        }
    }

    // MARK: - HTTP2SessionDelegate: the response side

    func http2ResponseBody(
        _ streamID: Int32, into buffer: UnsafeMutableRawBufferPointer
    ) -> (count: Int, last: Bool, trailers: [(String, String)])? {
        guard let stream = self.streams[streamID] else { return (0, true, []) }
        let count = min(buffer.count, stream.pendingResponseBytes)
        if count == 0 && !stream.responseComplete { return nil }
        if count > 0 {
            stream.responseBody.withUnsafeBytes { source in
                buffer.copyMemory(
                    from: UnsafeRawBufferPointer(
                        rebasing: source[stream.responseOffset..<stream.responseOffset + count]))
            }
            stream.responseOffset += count
            stream.bytesOut &+= UInt64(count)
            if stream.responseOffset == stream.responseBody.count {
                stream.responseBody.removeAll(keepingCapacity: stream.responseBody.capacity <= 64 * 1024)
                stream.responseOffset = 0
            }
            // Room again: its upstream may be read further.
            if stream.upstream != nil { self.repump = true }
        }
        let last = stream.responseComplete && stream.pendingResponseBytes == 0
        return (count, last, last ? stream.responseTrailers : [])
    }

    // MARK: - A request through the gate

    private func requestReceived(_ stream: HTTP2Stream, _ mapped: HTTP2MappedRequest) {
        var head = mapped.head
        stream.mapped = mapped
        stream.headRequest = head.method == "HEAD"
        let refusal = self.owner.prepareForwarding(head)
        stream.forwardedClient = self.owner.forwardedClient
        let proxies = self.owner.snapshot.trustedProxies
        var clientLimitKey = self.owner.peerLimitKey
        if stream.forwardedClient.peerIsTrusted {
            let clientAddress = proxies.clientAddress(peer: self.owner.peerAddress, forwardedFor: head.forwardedFor)
            clientLimitKey = IPAddressBytes.limitKey(clientAddress)
            stream.exchange.clientAddress = clientAddress
            stream.forwardedClient.originAddress = clientAddress
        }
        stream.exchange.correlation = RequestCorrelation.scan(
            head.headers, peerIsTrusted: stream.forwardedClient.peerIsTrusted,
            generate: { self.owner.loopContext.requestIDs.next() })
        let classification = self.owner.snapshot.gate.classify(head, client: clientLimitKey)
        stream.exchange.clientLimitKey = clientLimitKey
        stream.exchange.classification = classification
        let framing: RequestBodyFraming
        if let length = mapped.contentLength {
            framing = .contentLength(length)
        } else {
            framing = stream.requestEnded ? .none : .chunked
        }
        stream.exchange.info = HTTPRequestInfo(framing: framing, isKeepAlive: true, expectsContinue: false)
        head.versionMinor = 1
        stream.exchange.head = head
        if let refusal {
            self.refuse(stream, refusal.response, verdict: .rejected)
            return
        }
        if let cap = classification.bufferBodyUpTo {
            if let length = mapped.contentLength, length > UInt64(cap) {
                self.refuse(stream, ProxyError.bodyTooLarge(declared: length, cap: cap).response, verdict: .rejected)
                return
            }
            if stream.requestEnded || mapped.contentLength == 0 {
                self.callDecide(stream, body: [])
                return
            }
            stream.phase = .bufferingBody
            stream.bodyDeadline = max(self.loop.now &+ self.owner.timeouts.bufferedBody, 1)
            var body: [UInt8] = []
            if let length = mapped.contentLength {
                guard self.reserve(stream, Int(length)) else { return }
                body.reserveCapacity(Int(length))
            }
            stream.exchange.bufferedBody = body
            return
        }
        self.callDecide(stream, body: nil)
    }

    /// Grows the stream's reservation to `total` in the process-wide body budget and this
    /// connection's share; answers 503 `body_budget_exhausted` and returns false when either is spent.
    private func reserve(_ stream: HTTP2Stream, _ total: Int) -> Bool {
        let growth = total - stream.exchange.bodyReservation.bytes
        if growth > 0 && self.bufferedBodyBytes + growth > Self.maxBufferedBodyBytesPerConnection {
            self.refuse(stream, ProxyError.bodyBudgetExhausted.response, verdict: .rejected)
            return false
        }
        guard stream.exchange.bodyReservation.cover(total, from: self.owner.server.bodyBudget) else {
            self.owner.server.metrics.bodyBudgetRejections.increment()
            self.refuse(stream, ProxyError.bodyBudgetExhausted.response, verdict: .rejected)
            return false
        }
        if growth > 0 { self.bufferedBodyBytes += growth }
        return true
    }

    private func releaseReservation(_ stream: HTTP2Stream) {
        let held = stream.exchange.bodyReservation.bytes
        guard held > 0 else { return }
        self.bufferedBodyBytes -= held
        stream.exchange.bodyReservation.release(to: self.owner.server.bodyBudget)
    }

    private func callDecide(_ stream: HTTP2Stream, body: [UInt8]?) {
        guard let head = stream.exchange.head, let classification = stream.exchange.classification else { return }
        stream.phase = .deciding
        stream.bodyDeadline = 0
        stream.exchange.head?.headers = HTTPHeaders()
        let promise = GateDecisionPromise(loop: self.loop, receiver: stream)
        stream.promise = promise
        self.owner.snapshot.gate.decide(head, body: body, classification: classification, promise: promise)
        promise.askReturned()
    }

    func decisionArrived(_ decision: GateDecision, for stream: HTTP2Stream) {
        guard !self.isClosed, stream.phase == .deciding, self.streams[stream.id] === stream else { return }
        switch decision {
        case .forward(let head, let info):
            stream.exchange.logInfo = info
            guard let name = stream.exchange.classification?.upstream, let target = self.owner.upstreamTarget(name)
            else {
                self.upstreamFailed(.unavailable, for: stream)
                break
            }
            stream.exchange.target = target
            self.writeUpstreamHead(stream, head, target: target)
            if let body = stream.exchange.bufferedBody {
                stream.requestBytes.append(contentsOf: body)
                stream.exchange.bufferedBody = nil
            }
            stream.phase = .connecting
            self.armUpstreamDeadline(stream, connecting: true)
            self.acquireUpstream(stream, fresh: false)
        case .respond(let response, let info):
            stream.exchange.logInfo = info
            self.respondLocally(stream, response)
        }
        self.pump()
    }

    private func writeUpstreamHead(_ stream: HTTP2Stream, _ head: HTTPRequestHead, target: UpstreamTarget) {
        let requestID = stream.exchange.correlation?.requestID ?? self.owner.loopContext.requestIDs.next()
        let (head, correlation) = ExchangeTracing.upstream(
            head, stream.exchange.correlation ?? RequestCorrelation(requestID: requestID))
        let bound = UpstreamRequestPlan.headBound(
            gateHead: head, client: &stream.forwardedClient, upstreamHost: target.hostHeader, requestID: requestID)
        let memory = self.owner.loopContext.headScratch(atLeast: bound)
        var writer = HeadWriter(UnsafeMutableRawBufferPointer(rebasing: memory[0..<bound]))
        stream.exchange.requestEncoding = UpstreamRequestPlan.writeHead(
            gateHead: head, framing: stream.exchange.info?.framing ?? .none,
            bufferedBodyCount: stream.exchange.bufferedBody?.count, client: &stream.forwardedClient,
            upstreamHost: target.hostHeader, correlation: correlation, into: &writer)
        stream.requestBytes.removeAll(keepingCapacity: true)
        UnsafeRawBufferPointer(rebasing: memory[0..<writer.count]).withMemoryRebound(to: UInt8.self) {
            stream.requestBytes.append(contentsOf: $0)
        }
    }

    // MARK: - The upstream

    private func acquireUpstream(_ stream: HTTP2Stream, fresh: Bool) {
        guard let target = stream.exchange.target else { return }
        let pool = target.pools[self.loop.index]
        switch pool.acquire(for: stream, fresh: fresh) {
        case .ready(let connection): self.attach(connection, to: stream)
        case .connecting: break
        case .queued: stream.waitingPool = pool
        case .failed: self.upstreamFailed(.unavailable, for: stream)
        case .exhausted: self.upstreamFailed(.poolExhausted, for: stream)
        }
    }

    private func attach(_ connection: UpstreamConnection, to stream: HTTP2Stream) {
        stream.upstream = connection
        stream.phase = .exchanging
        self.armUpstreamDeadline(stream, connecting: false)
        stream.exchange.upstreamStart = SystemCalls.monotonicNanoseconds()
        connection.send(request: stream.requestBytes, method: stream.exchange.head?.method ?? "GET")
        if !stream.heldBody.isEmpty {
            let held = stream.heldBody
            stream.heldBody = []
            held.withUnsafeBytes { self.forwardBody(stream, $0) }
        }
        if stream.requestEnded && stream.exchange.requestEncoding == .chunked {
            var framing: [UInt8] = []
            HTTPSerializer.writeLastChunk(trailers: nil, into: &framing)
            connection.send(framing)
        }
        self.repump = true
    }

    private func forwardBody(_ stream: HTTP2Stream, _ bytes: UnsafeRawBufferPointer) {
        guard let upstream = stream.upstream else { return }
        if stream.exchange.requestEncoding == .chunked {
            var framing: [UInt8] = []
            HTTPSerializer.writeChunk(bytes, into: &framing)
            upstream.send(framing)
        } else {
            upstream.send(bytes)
        }
        if upstream.unsentRequestBytes > ProxyConnection.highWaterMark {
            stream.owedWindow += bytes.count
        } else {
            self.session.consume(stream.id, bytes.count)
        }
    }

    private func flushUpstream(_ stream: HTTP2Stream) {
        guard let upstream = stream.upstream else { return }
        if !upstream.flushRequest() {
            self.upstreamBroke(upstream, invalid: false, for: stream)
            return
        }
        if stream.owedWindow > 0 && upstream.unsentRequestBytes <= ProxyConnection.highWaterMark {
            self.session.consume(stream.id, stream.owedWindow)
            stream.owedWindow = 0
            self.repump = true
        }
    }

    func upstreamReady(_ connection: UpstreamConnection, for stream: HTTP2Stream) {
        guard !self.isClosed, stream.phase == .connecting, self.streams[stream.id] === stream else {
            connection.pool.release(connection, reusable: true)
            return
        }
        stream.waitingPool = nil
        self.attach(connection, to: stream)
        self.pump()
    }

    func upstreamFailed(_ failure: ProxyConnectionStateMachine.UpstreamFailure, for stream: HTTP2Stream) {
        guard !self.isClosed, self.streams[stream.id] === stream else { return }
        stream.waitingPool = nil
        self.countUpstreamError(failure, stream)
        self.respondLocally(stream, Self.upstreamError(failure).response)
        self.pump()
    }

    func upstreamBroke(_ connection: UpstreamConnection, invalid: Bool, for stream: HTTP2Stream) {
        let wasIdle = connection.isReused
        let anyByte = connection.receivedResponseByte
        if stream.upstream === connection { stream.upstream = nil }
        connection.pool.release(connection, reusable: false)
        guard self.streams[stream.id] === stream else { return }
        // A pooled connection that died idle, before any response byte: send the whole request again once.
        let replayable =
            stream.exchange.requestEncoding == .none || stream.exchange.classification?.bufferBodyUpTo != nil
        if !invalid && wasIdle && !anyByte && replayable && !stream.retried && stream.phase == .exchanging {
            stream.retried = true
            stream.phase = .connecting
            self.armUpstreamDeadline(stream, connecting: true)
            self.acquireUpstream(stream, fresh: true)
            return
        }
        let failure: ProxyConnectionStateMachine.UpstreamFailure = invalid ? .invalidResponse : .unavailable
        self.countUpstreamError(failure, stream)
        if stream.phase == .responded {
            // The response started: the client learns of the break from a reset.
            self.session.reset(stream.id, .internalError)
        } else {
            self.respondLocally(stream, Self.upstreamError(failure).response)
        }
        self.repump = true
    }

    func upstreamResponse(
        _ event: HTTPResponseEvent, in slice: UnsafeRawBufferPointer, from connection: UpstreamConnection,
        for stream: HTTP2Stream
    ) {
        self.armUpstreamDeadline(stream, connecting: false)
        switch event {
        case .informational:
            break  // 1xx are not relayed over HTTP/2 (the gateway answers Expect itself).
        case .head:
            preconditionFailure("the proxy's response parser delivers raw heads")
        case .rawHead(let raw, let info):
            let head = HeaderRewriting.clientResponse(raw.head(in: slice))
            stream.exchange.responseStatus = head.status
            stream.upstreamKeepAlive = info.isKeepAlive
            var fields: [(String, String)] = []
            for field in head.headers {
                let name = field.name.lowercased()
                if name == "x-request-id" || HTTP2RequestMapping.connectionSpecificNames.contains(Array(name.utf8)) {
                    continue
                }
                fields.append((name, field.value))
            }
            if let requestID = stream.exchange.correlation?.requestID {
                fields.append(("x-request-id", requestID.text))
            }
            let hasBody = !stream.headRequest && info.framing != .none
            stream.phase = .responded
            stream.responseComplete = !hasBody
            self.session.respond(stream.id, status: head.status, headers: fields, hasBody: hasBody)
        case .body(let range):
            stream.responseBody.append(contentsOf: UnsafeRawBufferPointer(rebasing: slice[range]))
            self.session.resume(stream.id)
        case .end(let trailers):
            if let trailers = HeaderRewriting.forwardedTrailers(trailers) {
                stream.responseTrailers = trailers.fields.map { ($0.name.lowercased(), $0.value) }
            }
            stream.responseComplete = true
            stream.upstreamDeadline = 0
            if let name = stream.exchange.classification?.upstream, stream.exchange.upstreamStart != 0 {
                self.recorder.upstreamResponded(
                    name, nanoseconds: SystemCalls.monotonicNanoseconds() &- stream.exchange.upstreamStart)
            }
            stream.upstream = nil
            connection.pool.release(connection, reusable: stream.upstreamKeepAlive && self.upstreamIsClean(stream))
            self.session.resume(stream.id)
        case .error:
            self.upstreamBroke(connection, invalid: true, for: stream)
        }
    }

    /// The upstream connection carried the whole request: it may serve another.
    private func upstreamIsClean(_ stream: HTTP2Stream) -> Bool {
        stream.requestEnded && stream.heldBody.isEmpty
    }

    private static func upstreamError(_ failure: ProxyConnectionStateMachine.UpstreamFailure) -> ProxyError {
        switch failure {
        case .unavailable: .upstreamUnavailable
        case .timeout: .upstreamTimeout
        case .invalidResponse: .upstreamInvalidResponse
        case .poolExhausted: .upstreamBusy
        case .tls(let tls): tls.error
        }
    }

    private func countUpstreamError(_ failure: ProxyConnectionStateMachine.UpstreamFailure, _ stream: HTTP2Stream) {
        let kind: String
        switch failure {
        case .unavailable: kind = "unavailable"
        case .timeout: kind = "timeout"
        case .invalidResponse: kind = "invalid_response"
        case .poolExhausted: kind = "pool_exhausted"
        case .tls: kind = "tls"
        }
        self.owner.server.metrics.upstreamErrors.labels(stream.exchange.classification?.upstream ?? "-", kind)
            .increment()
    }

    // MARK: - The gateway's own answers

    private func contentLengthMismatch(_ stream: HTTP2Stream) {
        let error = HTTP2RequestError(
            .contentLengthMismatch, "the DATA received does not add up to the request's content-length")
        guard stream.phase != .responded else {
            self.session.reset(stream.id, .protocolError)
            return
        }
        if let upstream = stream.upstream {
            stream.upstream = nil
            upstream.pool.release(upstream, reusable: false)
        }
        self.answerLocally(
            stream, .jsonError(status: error.status, code: error.code.rawValue, message: error.message),
            verdict: .malformed)
    }

    private func refuse(_ stream: HTTP2Stream, _ response: LocalResponse, verdict: AttestVerdict) {
        self.answerLocally(stream, response, verdict: verdict)
    }

    private func answerLocally(_ stream: HTTP2Stream, _ response: LocalResponse, verdict: AttestVerdict) {
        stream.exchange.logInfo = GateLogInfo(verdict: verdict)
        self.respondLocally(stream, response)
    }

    /// Writes the gateway's answer on `stream`: JSON as over HTTP/1.1, or, for a gRPC request,
    /// a trailers-only gRPC status (`GRPCRefusal`). Body bytes the client still sends are
    /// acknowledged and dropped.
    private func respondLocally(_ stream: HTTP2Stream, _ response: LocalResponse) {
        if let pool = stream.waitingPool {
            pool.cancelWait(stream)
            stream.waitingPool = nil
        }
        stream.promise = nil
        stream.phase = .responded
        stream.upstreamDeadline = 0
        stream.bodyDeadline = 0
        stream.exchange.bufferedBody = nil
        self.releaseReservation(stream)
        if !stream.heldBody.isEmpty {
            self.session.consume(stream.id, stream.heldBody.count)
            stream.heldBody = []
        }
        let requestID = stream.exchange.correlation?.requestID ?? self.owner.loopContext.requestIDs.next()
        if stream.mapped?.isGRPC ?? stream.isGRPCGuess {
            let refusal = GRPCRefusal(response)
            stream.exchange.responseStatus = 200
            stream.responseComplete = true
            self.session.respond(
                stream.id, status: 200, headers: refusal.headers + [("x-request-id", requestID.text)], hasBody: false)
            return
        }
        stream.exchange.responseStatus = response.status
        var fields: [(String, String)] = response.headers.fields.map { ($0.name.lowercased(), $0.value) }
        fields.append(("content-length", String(response.body.count)))
        fields.append(("x-request-id", requestID.text))
        let hasBody = !stream.headRequest && !response.body.isEmpty
        if hasBody { stream.responseBody = response.body }
        stream.responseOffset = 0
        stream.responseComplete = true
        self.session.respond(stream.id, status: response.status, headers: fields, hasBody: hasBody)
    }

    /// Access log and metrics, once per stream.
    private func record(_ stream: HTTP2Stream) {
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

    private func finishClose(_ why: String) {
        guard !self.finished else { return }
        self.finished = true
        self.lingering = false
        self.owner.http2Closed(why)
    }

    /// Every stream's lease, wait and decision is let go; each is logged once.
    private func abandonStreams() {
        for stream in self.streams.values {
            stream.promise = nil
            if let upstream = stream.upstream {
                stream.upstream = nil
                upstream.pool.release(upstream, reusable: false)
            }
            if let pool = stream.waitingPool {
                pool.cancelWait(stream)
                stream.waitingPool = nil
            }
            self.record(stream)
        }
        self.streams.removeAll()
    }
}
