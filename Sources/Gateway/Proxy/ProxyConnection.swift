import Glibc
import HTTP1

/// One client connection: the thin I/O class that executes `ProxyConnectionStateMachine`.
///
/// Reads go into the loop's shared scratch buffer when the connection holds no partial
/// data, so an idle keep-alive connection owns no buffers. Output (client- and
/// upstream-bound) is queued during a pass and flushed once at its end. All work happens
/// in `pump()`, which never nests: callbacks that arrive while it runs only ask for
/// another round (`repump`), so the scratch buffer is never used by two parsers at once.
///
/// Back-pressure: the client's body is not read while the upstream's unsent output is
/// above `highWaterMark`, and the upstream's response is not read while the client's
/// unsent output is above it; bodies therefore stream with bounded memory.
///
/// Confined to `loop.queue` (hence `@unchecked Sendable`, needed for the gate's completion).
///
/// Stored properties are `@exclusivity(unchecked)` (here and in the other per-request classes:
/// `UpstreamConnection`, `UpstreamPool`, `EventLoop`, `IOBuffer`, `LoopContext`): they are used
/// on one queue only and no method holds an `inout` access to one across a call that uses it
/// again (`pump()` never nests), so the runtime's dynamic checks (about 57 per proxied request,
/// ~85 instructions each: 9% of the gateway's user-space instructions) only cost.
final class ProxyConnection: EventHandler, UpstreamLessee, @unchecked Sendable {
    static let highWaterMark = 256 * 1024
    /// Unparsed client bytes kept at most (pipelined requests, a paused body).
    static let maxBufferedInput = 256 * 1024
    /// How long a closing connection reads and discards what the client still sends.
    static let lingerNanoseconds: UInt64 = 2_000_000_000
    static let continueBytes: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
    /// `requestHeadBytes` keeps its capacity between requests up to this (a head, not a body).
    static let retainedHeadBytesCapacity = 64 * 1024

    let fd: Int32
    let loop: EventLoop
    let loopContext: LoopContext
    let context: ListenerContext
    unowned let server: GatewayServer
    let peerAddress: String
    /// `peerAddress` as per-address limits count it (`IPAddressBytes.limitKey`).
    let peerLimitKey: String
    /// The current request's client address key (after `trusted_proxies`): per-address limits.
    @exclusivity(unchecked) private var clientLimitKey: String
    /// Body bytes the current request holds of its client address's share (with `bodyReservation`).
    @exclusivity(unchecked) private var addressReservedBytes = 0
    /// The peer as X-Forwarded-For and Forwarded name it.
    private let forwardedClient: UpstreamRequestPlan.Client
    @exclusivity(unchecked) private var token: UInt64 = 0

    @exclusivity(unchecked) private var machine = ProxyConnectionStateMachine()
    @exclusivity(unchecked) private var parser: HTTPRequestParser
    @exclusivity(unchecked) private var input: IOBuffer?
    @exclusivity(unchecked) private var output: IOBuffer?
    @exclusivity(unchecked) private var clientMayRead = true
    /// EPOLLRDHUP was seen: read until EOF instead of stopping at a short read.
    @exclusivity(unchecked) private var clientSentFIN = false
    @exclusivity(unchecked) private var clientWriteInterest = false
    @exclusivity(unchecked) private var clientReadClosed = false
    @exclusivity(unchecked) private var isClosed = false
    @exclusivity(unchecked) private var isLingering = false
    @exclusivity(unchecked) private var pumping = false
    @exclusivity(unchecked) private var repump = false
    @exclusivity(unchecked) private var timerKind: ProxyConnectionStateMachine.Timer?

    // Configuration snapshot (re-read when the listener's generation changes).
    @exclusivity(unchecked) private var snapshot: ListenerContext.Snapshot
    @exclusivity(unchecked) private var snapshotGeneration: UInt64
    /// The snapshot's limits in nanoseconds, for the per-request timer updates.
    @exclusivity(unchecked) private var timeouts: Timeouts

    private struct Timeouts {
        var keepAliveIdle: UInt64
        var headerRead: UInt64
        var bodyReadIdle: UInt64
        var upstreamConnect: UInt64
        var upstreamResponse: UInt64

        init(_ limits: GatewayLimits) {
            self.keepAliveIdle = limits.keepAliveIdleTimeout.nanoseconds
            self.headerRead = limits.headerReadTimeout.nanoseconds
            self.bodyReadIdle = limits.bodyReadIdleTimeout.nanoseconds
            self.upstreamConnect = limits.upstreamConnectTimeout.nanoseconds
            self.upstreamResponse = limits.upstreamResponseTimeout.nanoseconds
        }
    }

    // The current request.
    @exclusivity(unchecked) private var head: HTTPRequestHead?
    @exclusivity(unchecked) private var requestInfo: HTTPRequestInfo?
    @exclusivity(unchecked) private var classification: GateClassification?
    @exclusivity(unchecked) private var bufferedBody: [UInt8]?
    /// What the buffered body holds of `server.bodyBudget`: taken before the bytes are
    /// buffered, returned when the request is finished or the connection closes (until then
    /// the body is kept, in `bufferedBody` or `requestHeadBytes`, for `decide` and a retry).
    @exclusivity(unchecked) private var bodyReservation = BufferedBodyBudget.Reservation()
    /// The parser still owes the `.end` of a request without body.
    @exclusivity(unchecked) private var parserOwesEnd = false
    @exclusivity(unchecked) private var decisionSerial = 0
    @exclusivity(unchecked) private var isInsideDecide = false
    @exclusivity(unchecked) private var synchronousDecision: GateDecision?
    @exclusivity(unchecked) private var logInfo: GateLogInfo?
    @exclusivity(unchecked) private var target: UpstreamTarget?
    @exclusivity(unchecked) private var upstream: UpstreamConnection?
    @exclusivity(unchecked) private var waitingPool: UpstreamPool?
    @exclusivity(unchecked) private var requestHeadBytes: [UInt8] = []
    @exclusivity(unchecked) private var requestEncoding: BodyEncoding = .none
    @exclusivity(unchecked) private var responseEncoding: BodyEncoding = .none
    @exclusivity(unchecked) private var responseCloseAfter = false
    @exclusivity(unchecked) private var upstreamKeepAlive = false
    @exclusivity(unchecked) private var responseStatus = 0
    @exclusivity(unchecked) private var requestStart: UInt64 = 0
    @exclusivity(unchecked) private var upstreamStart: UInt64 = 0
    /// Of the current snapshot (cleared when it changes).
    @exclusivity(unchecked) private var lastTarget: (name: String, target: UpstreamTarget)?
    @exclusivity(unchecked) private var lastRouteMetrics: (name: String, handles: ProxyMetricsCache.RouteHandles)?
    @exclusivity(unchecked) private var lastUpstreamMetric: (name: String, histogram: Histogram)?

    private init(
        fd: Int32, peer: SocketAddress, context: ListenerContext, loopContext: LoopContext, server: GatewayServer
    ) {
        self.fd = fd
        self.loop = loopContext.loop
        self.loopContext = loopContext
        self.context = context
        self.server = server
        self.peerAddress = peer.ipText
        self.peerLimitKey = IPAddressBytes.limitKey(peer.ipText)
        self.clientLimitKey = self.peerLimitKey
        self.forwardedClient = UpstreamRequestPlan.Client(address: self.peerAddress)
        self.snapshotGeneration = context.generation
        self.snapshot = context.snapshot
        self.timeouts = Timeouts(self.snapshot.limits)
        self.parser = HTTPRequestParser(
            limits: HTTPParserLimits(
                maxHeaderBytes: self.snapshot.limits.maxHeaderBytes, maxHeaderCount: self.snapshot.limits.maxHeaderCount
            ))
    }

    static func start(
        fd: Int32, peer: SocketAddress, context: ListenerContext, loopContext: LoopContext, server: GatewayServer
    ) {
        let connection = ProxyConnection(fd: fd, peer: peer, context: context, loopContext: loopContext, server: server)
        SystemCalls.setNoDelay(fd)
        do {
            connection.token = try connection.loop.register(fd: fd, handler: connection)
        } catch {
            SystemCalls.close(fd)
            server.connectionClosed(peerLimitKey: connection.peerLimitKey)
            return
        }
        loopContext.add(connection)
        if server.isDraining {
            connection.forceClose()
            return
        }
        connection.pump()
    }

    // MARK: - Events

    func handleEvents(_ events: UInt32) {
        if events & (EventLoop.readable | EventLoop.hangup | EventLoop.error) != 0 {
            self.clientMayRead = true
        }
        if events & EventLoop.readHangup != 0 { self.clientSentFIN = true }
        if events & (EventLoop.error | EventLoop.peerClosed) != 0 && !self.isLingering {
            // Reset, or both directions closed: no response can reach the client any more.
            self.clientGone("client reset or hung up")
            return
        }
        self.pump()
    }

    func handleDeadline() {
        guard !self.isClosed else { return }
        if self.isLingering {
            self.close("linger deadline")
            return
        }
        let timer = self.machine.timer
        let phase = self.machine.phase
        if (timer == .upstreamConnect || timer == .upstreamResponse) && (phase == .connecting || phase == .exchanging) {
            self.countUpstreamError(.timeout)
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
        case .respond(let status, let code, let message):
            if let upstream = self.upstream {
                self.releaseUpstream(upstream, reusable: false)
            }
            self.cancelWaiting()
            self.queueLocalResponse(.jsonError(status: status, code: code, message: message), keepAlive: false)
            self.finishRequest(keepAlive: false)
        }
        self.pump()
    }

    func upstreamReady(_ connection: UpstreamConnection) {
        guard !self.isClosed, self.machine.phase == .connecting else {
            // The lease arrived after the client went away: give it back.
            // No request was written on this lease: the connection is clean.
            connection.responseCompleteAndReusable = true
            connection.pool.release(connection, reusable: true)
            return
        }
        self.waitingPool = nil
        self.attach(connection)
        self.pump()
    }

    func upstreamFailed(_ failure: ProxyConnectionStateMachine.UpstreamFailure, connection: UpstreamConnection?) {
        guard !self.isClosed, self.machine.phase == .connecting else { return }
        self.waitingPool = nil
        self.handleUpstreamFailure(failure, wasIdle: false, anyByte: false)
        self.pump()
    }

    func upstreamEvents(_ connection: UpstreamConnection, _ events: UInt32) {
        guard connection === self.upstream else { return }
        self.pump()
    }

    // MARK: - The pump

    private func pump() {
        if self.pumping {
            self.repump = true
            return
        }
        self.pumping = true
        repeat {
            self.repump = false
            if self.isLingering {
                self.discardInput()
                break
            }
            self.processClientInput()
            if let upstream = self.upstream, !self.isClosed {
                self.processUpstreamInput(upstream)
            }
            self.flushUpstream()
            self.flushClient()
        } while self.repump && !self.isClosed
        self.pumping = false
        if self.isClosed || self.isLingering { return }
        if self.machine.phase == .closing && (self.output?.isEmpty ?? true) {
            self.startClosing()
            return
        }
        self.updateTimer()
    }

    private func updateTimer() {
        let kind = self.machine.timer
        // The header timer is not refreshed by trickling bytes (slowloris).
        if kind == .headerRead && self.timerKind == .headerRead { return }
        self.timerKind = kind
        guard let kind else {
            self.loop.setDeadline(token: self.token, after: nil)
            return
        }
        let timeouts = self.timeouts
        let after: UInt64
        switch kind {
        case .keepAliveIdle: after = timeouts.keepAliveIdle
        case .headerRead: after = timeouts.headerRead
        case .bodyReadIdle, .bufferedBody:
            // A buffered body's total deadline may come first (`limits.buffered_body_timeout`).
            self.loop.setDeadline(
                token: self.token, after: self.machine.timerDelay(configured: timeouts.bodyReadIdle, now: self.loop.now)
            )
            return
        case .upstreamConnect: after = self.target?.connectTimeoutNanoseconds ?? timeouts.upstreamConnect
        case .upstreamResponse: after = self.target?.responseTimeoutNanoseconds ?? timeouts.upstreamResponse
        }
        self.loop.setDeadline(token: self.token, after: after)
    }

    // MARK: - Client input

    private var upstreamIsBackedUp: Bool {
        (self.upstream?.output.readableCount ?? 0) > Self.highWaterMark
    }

    /// The phase wants request bytes parsed. Back-pressure does not stop parsing what is
    /// already buffered (at most one read, or `maxBufferedInput`): it only stops reading the
    /// socket. So a zero-byte `.end` after the last body bytes is never left behind.
    private var wantsClientInput: Bool {
        (self.machine.wantsRequestBytes || self.parserOwesEnd) && !self.isClosed
    }

    private func processClientInput() {
        while self.wantsClientInput {
            if let input = self.input, !input.isEmpty {
                let phaseBefore = self.machine.phase
                let consumed = self.parseRequest(input.readableBytes)
                if self.isClosed { return }
                input.consume(consumed)
                if consumed > 0 || self.machine.phase != phaseBefore { continue }
                if input.readableCount >= Self.maxBufferedInput { return }
            }
            guard self.clientMayRead && !self.clientReadClosed && !self.upstreamIsBackedUp else { return }
            if !self.readClient() { return }
        }
    }

    /// One `read(2)` from `fd`: into the loop's shared scratch buffer when `input` holds no
    /// partial data (so an idle connection owns no buffer memory), else appended to `input`.
    /// `requested` is the room offered, so a short read can end the read round.
    private func read(
        from fd: Int32,
        into input: IOBuffer?
    ) throws(IOError) -> (result: IOResult, usesScratch: Bool, requested: Int) {
        guard let input, !input.isEmpty else {
            let scratch = self.loop.scratch
            guard let base = scratch.baseAddress else { preconditionFailure("loop scratch buffer is empty") }
            return (try SystemCalls.read(fd, into: base, count: scratch.count), true, scratch.count)
        }
        input.reserveWritable(16 * 1024)
        let requested = input.writableCount
        let result = try SystemCalls.read(fd, into: input.writablePointer, count: requested)
        if case .processed(let n) = result { input.didWrite(n) }
        return (result, false, requested)
    }

    /// One read from the client socket, parsed at once. Returns false when nothing more can be read now.
    private func readClient() -> Bool {
        let result: IOResult
        let usesScratch: Bool
        let requested: Int
        do {
            (result, usesScratch, requested) = try self.read(from: self.fd, into: self.input)
        } catch {
            self.clientGone("client read error")
            return false
        }
        switch result {
        case .wouldBlock:
            self.clientMayRead = false
            return false
        case .endOfFile:
            self.clientReadClosed = true
            self.clientEndOfFile()
            return false
        case .processed(let n):
            // A short read drained the socket: the next data makes a new edge (saves the EAGAIN read).
            if n < requested && !self.clientSentFIN { self.clientMayRead = false }
            if usesScratch {
                let bytes = UnsafeRawBufferPointer(start: self.loop.scratch.baseAddress, count: n)
                let consumed = self.parseRequest(bytes)
                if consumed < n && !self.isClosed {
                    let rest = UnsafeRawBufferPointer(rebasing: bytes[consumed...])
                    let input = self.input ?? self.loopContext.takeBuffer()
                    input.append(rest)
                    self.input = input
                }
            }
            return true
        }
    }

    /// Feeds `buffer` to the parser while the phase wants request bytes; returns the bytes consumed.
    private func parseRequest(_ buffer: UnsafeRawBufferPointer) -> Int {
        var offset = 0
        while self.wantsClientInput {
            let slice = UnsafeRawBufferPointer(rebasing: buffer[offset...])
            if self.machine.phase == .idle && !slice.isEmpty && !self.parserOwesEnd {
                self.machine.headBytesReceived()
            }
            let (event, consumed) = self.parser.next(slice)
            offset += consumed
            guard let event else { break }
            switch event {
            case .head(let head, let info):
                self.parserOwesEnd = false
                self.requestHeadReceived(head, info)
            case .body(let range):
                self.requestBodyReceived(UnsafeRawBufferPointer(rebasing: slice[range]))
            case .end(let trailers):
                if self.parserOwesEnd {
                    self.parserOwesEnd = false
                } else {
                    self.requestEnded(trailers: trailers)
                }
            case .error(let error):
                self.requestInvalid(error)
                return offset
            }
        }
        return offset
    }

    private func clientEndOfFile() {
        switch self.machine.phase {
        case .idle:
            // Closed between requests (or mid-head): nothing more to answer. A response still
            // being written (a half-closed client) is flushed first.
            if self.output?.isEmpty ?? true {
                self.close("client closed between requests")
            } else {
                self.machine.exchangeFinished(keepAlive: false)
            }
        case .bufferingBody, .deciding, .connecting, .exchanging:
            if !self.machine.requestComplete {
                // Gone mid-body: the upstream connection is in an unknown state.
                self.abort("client closed mid-body")
            }
        // Otherwise a half-close after a complete request: the response is still delivered.
        case .respondingLocally, .closing, .closed:
            break
        }
    }

    private func clientGone(_ why: String) {
        self.clientReadClosed = true
        self.abort(why)
    }

    private func discardInput() {
        while self.clientMayRead && !self.isClosed {
            do {
                let scratch = self.loop.scratch
                switch try SystemCalls.read(self.fd, into: scratch.baseAddress!, count: scratch.count) {
                case .processed: continue
                case .wouldBlock: self.clientMayRead = false
                case .endOfFile: self.close("client closed while lingering")
                }
            } catch {
                self.close("read error while lingering")
            }
        }
    }

    // MARK: - Request handling

    private func refreshSnapshot() {
        let generation = self.context.generation
        if generation != self.snapshotGeneration {
            self.snapshotGeneration = generation
            self.snapshot = self.context.snapshot
            self.lastTarget = nil
            self.timeouts = Timeouts(self.snapshot.limits)
        }
    }

    private func requestHeadReceived(_ head: HTTPRequestHead, _ info: HTTPRequestInfo) {
        assert(self.bodyReservation.bytes == 0, "the previous request's body reservation was not released")
        assert(self.addressReservedBytes == 0, "the previous request's address share was not released")
        self.requestStart = SystemCalls.monotonicNanoseconds()
        self.upstreamStart = 0
        self.refreshSnapshot()
        let proxies = self.snapshot.trustedProxies
        self.clientLimitKey =
            proxies.isEmpty
            ? self.peerLimitKey
            : IPAddressBytes.limitKey(proxies.clientAddress(peer: self.peerAddress, forwardedFor: head.forwardedFor))
        let classification = self.snapshot.gate.classify(head, client: self.clientLimitKey)
        self.head = head
        self.requestInfo = info
        self.classification = classification
        self.logInfo = nil
        self.responseStatus = 0
        self.bufferedBody = nil
        self.target = nil
        self.parserOwesEnd = info.framing == .none || info.framing == .contentLength(0)
        let action = self.machine.requestHeadReceived(
            method: head.method, framing: info.framing, keepAlive: info.isKeepAlive,
            expectsContinue: info.expectsContinue, bufferBodyUpTo: classification.bufferBodyUpTo,
            bufferedBodyDeadline: classification.bufferBodyUpTo == nil
                ? nil : self.requestStart &+ self.snapshot.limits.bufferedBodyTimeout.nanoseconds)
        switch action {
        case .decide:
            self.callDecide(body: nil)
        case .decideWithEmptyBody:
            self.callDecide(body: [])
        case .bufferBody(let sendContinue):
            var body: [UInt8] = []
            if case .contentLength(let length) = info.framing {
                // The whole declared body at once: it is allocated at once too.
                guard self.reserveBody(Int(length)) else { return }
                body.reserveCapacity(Int(length))
            }
            self.bufferedBody = body
            if sendContinue { self.queueClientBytes(Self.continueBytes) }
        case .reject(let status, let code, let message):
            self.logInfo = GateLogInfo(verdict: "rejected")
            self.queueLocalResponse(.jsonError(status: status, code: code, message: message), keepAlive: false)
            self.finishRequest(keepAlive: self.machine.localResponseWritten())
        }
    }

    private func requestBodyReceived(_ bytes: UnsafeRawBufferPointer) {
        switch self.machine.phase {
        case .bufferingBody:
            // A chunked body reserves as it arrives (beyond the route's cap 413 comes first).
            let total = (self.bufferedBody?.count ?? 0) + bytes.count
            if total <= self.machine.bufferCap ?? Int.max {
                guard self.reserveBody(total) else { return }
            }
            self.bufferedBody?.append(contentsOf: bytes)
            if case .reject(let status, let code, let message) = self.machine.bufferedBodyReceived(total: total) {
                self.bufferedBody = nil
                self.logInfo = GateLogInfo(verdict: "rejected")
                self.queueLocalResponse(.jsonError(status: status, code: code, message: message), keepAlive: false)
                self.finishRequest(keepAlive: self.machine.localResponseWritten())
            }
        case .exchanging:
            guard let upstream = self.upstream else { return }
            switch self.requestEncoding {
            case .chunked:
                var framing = self.takeScratchBytes()
                HTTPSerializer.writeChunk(bytes, into: &framing)
                upstream.output.append(framing)
                self.returnScratchBytes(framing)
            case .identity, .none:
                upstream.output.append(bytes)
            }
        default:
            break
        }
    }

    /// Grows the body's reservation in the process-wide budget to `total` bytes. When the
    /// budget cannot, answers 503 `body_budget_exhausted` (the connection closes) and returns false.
    private func reserveBody(_ total: Int) -> Bool {
        guard self.reserveAddressShare(total) else { return false }
        let budget = self.server.bodyBudget
        if self.bodyReservation.cover(total, from: budget) { return true }
        self.server.metrics.bodyBudgetRejections.increment()
        if let suppressed = budget.logThrottle.admit() {
            Log.warning(
                "body_budget_exhausted",
                [
                    ("route", self.classification?.routeName ?? "-"), ("body_bytes", String(total)),
                    ("buffered_bytes", String(budget.inUse)), ("max_buffered_body_bytes", String(budget.limit)),
                    ("suppressed", String(suppressed)),
                ])
        }
        guard case .reject(let status, let code, let message) = self.machine.bodyBudgetExhausted() else { return false }
        self.bufferedBody = nil
        self.logInfo = GateLogInfo(verdict: "rejected")
        var response = LocalResponse.jsonError(status: status, code: code, message: message)
        response.headers.add(name: "Retry-After", value: "1")
        self.queueLocalResponse(response, keepAlive: false)
        self.finishRequest(keepAlive: self.machine.localResponseWritten())
        return false
    }

    /// Grows what the client address holds of `limits.max_buffered_body_bytes_per_address` to
    /// `total`; when it cannot, answers 429 `rate_limited` (the connection closes) and returns
    /// false. One address can so hold at most its share of the global budget.
    private func reserveAddressShare(_ total: Int) -> Bool {
        let delta = total - self.addressReservedBytes
        guard delta > 0 else { return true }
        let limit = self.snapshot.limits.maxBufferedBodyBytesPerAddress
        if self.server.addressBodyBytes.tryAdd(self.clientLimitKey, delta, limit: limit) {
            self.addressReservedBytes = total
            return true
        }
        self.server.metrics.limitRefusals.labels("body_bytes_per_address").increment()
        if let suppressed = self.server.bodyBudget.logThrottle.admit() {
            Log.warning(
                "rate_limited",
                [
                    ("limit", "body_bytes_per_address"), ("route", self.classification?.routeName ?? "-"),
                    ("body_bytes", String(total)),
                    ("held_by_address", String(self.server.addressBodyBytes.held(self.clientLimitKey))),
                    ("max_buffered_body_bytes_per_address", String(limit)), ("suppressed", String(suppressed)),
                ])
        }
        guard case .reject = self.machine.bodyBudgetExhausted() else { return false }
        self.bufferedBody = nil
        self.logInfo = GateLogInfo(verdict: AttestVerdict.rateLimited.rawValue)
        let error = EnforcementError(
            .rateLimited,
            "this address holds its share of the gateway's buffered request bodies; retry later",
            retryAfterSeconds: 1)
        self.queueLocalResponse(error.response, keepAlive: false)
        self.finishRequest(keepAlive: self.machine.localResponseWritten())
        return false
    }

    /// Gives back the current request's body bytes: the global budget and the address's share.
    private func releaseBodyReservation() {
        if self.bodyReservation.bytes > 0 { self.bodyReservation.release(to: self.server.bodyBudget) }
        if self.addressReservedBytes > 0 {
            self.server.addressBodyBytes.remove(self.clientLimitKey, self.addressReservedBytes)
            self.addressReservedBytes = 0
        }
    }

    /// A buffered body missed `limits.buffered_body_timeout`: counted and logged (at most one
    /// line a second) with the route and how much of the body had arrived; the 408 follows.
    private func bufferedBodyTimedOut() {
        let route = self.classification?.routeName ?? "-"
        self.server.metrics.bufferedBodyTimeouts.labels(route).increment()
        guard let suppressed = self.server.bodyBudget.timeoutLogThrottle.admit() else { return }
        var declared = "-"
        switch self.requestInfo?.framing {
        case .contentLength(let length): declared = String(length)
        case .chunked: declared = "chunked"
        case .some(.none), nil: break
        }
        Log.warning(
            "buffered_body_timeout",
            [
                ("route", route), ("client", self.peerAddress),
                ("body_bytes_received", String(self.bufferedBody?.count ?? 0)), ("body_bytes_declared", declared),
                ("buffered_body_timeout", PolicyValues.format(self.snapshot.limits.bufferedBodyTimeout)),
                ("suppressed", String(suppressed)),
            ])
    }

    private func requestEnded(trailers: HTTPHeaders?) {
        if self.machine.phase == .exchanging, self.requestEncoding == .chunked, let upstream = self.upstream {
            var framing = self.takeScratchBytes()
            HTTPSerializer.writeLastChunk(trailers: HeaderRewriting.forwardedTrailers(trailers), into: &framing)
            upstream.output.append(framing)
            self.returnScratchBytes(framing)
        }
        switch self.machine.requestEnded() {
        case .none:
            break
        case .decide:
            let body = self.bufferedBody ?? []
            self.callDecide(body: body)
        case .complete(let keepAlive):
            self.finishRequest(keepAlive: keepAlive && !self.responseCloseAfter)
        }
    }

    private func requestInvalid(_ error: HTTPParserError) {
        self.logInfo = GateLogInfo(verdict: "malformed")
        if let upstream = self.upstream {
            self.releaseUpstream(upstream, reusable: false)
        }
        self.cancelWaiting()
        if self.machine.responseStarted {
            self.abort("invalid request after the response started")
            return
        }
        if self.head == nil || self.machine.phase == .idle {
            self.head = nil
            self.requestStart = SystemCalls.monotonicNanoseconds()
        }
        self.machine.requestInvalid()
        self.queueLocalResponse(
            .jsonError(
                status: error.status, code: error.code, message: "the request is not valid HTTP/1.1 (\(error.code))"),
            keepAlive: false)
        self.finishRequest(keepAlive: self.machine.localResponseWritten())
    }

    // MARK: - The gate

    private func callDecide(body: [UInt8]?) {
        guard let head = self.head, let classification = self.classification else { return }
        self.decisionSerial &+= 1
        let serial = self.decisionSerial
        self.isInsideDecide = true
        self.synchronousDecision = nil
        self.snapshot.gate.decide(head, body: body, classification: classification) { [self] decision in
            if self.loop.inLoop {
                // A gate that completes at once, inside `decide`: handled when it returns.
                if self.isInsideDecide && self.decisionSerial == serial {
                    self.synchronousDecision = decision
                    return
                }
                // Completed later on this loop (the loop's own Redis connection): no hop.
                self.decisionArrived(decision, serial: serial)
                return
            }
            self.loop.execute { self.decisionArrived(decision, serial: serial) }
        }
        self.isInsideDecide = false
        if let decision = self.synchronousDecision {
            self.synchronousDecision = nil
            self.decisionArrived(decision, serial: serial)
        }
    }

    private func decisionArrived(_ decision: GateDecision, serial: Int) {
        guard !self.isClosed, serial == self.decisionSerial, self.machine.phase == .deciding else { return }
        switch decision {
        case .forward(let head, let info):
            self.logInfo = info
            guard case .connectUpstream(let sendContinue) = self.machine.decided(forward: true) else { return }
            if sendContinue { self.queueClientBytes(Self.continueBytes) }
            guard let name = self.classification?.upstream, let target = self.upstreamTarget(name) else {
                self.handleUpstreamFailure(.unavailable, wasIdle: false, anyByte: false)
                break
            }
            self.target = target
            self.requestEncoding = self.writeUpstreamHead(head, target: target)
            if let body = self.bufferedBody {
                self.requestHeadBytes.append(contentsOf: body)
                self.bufferedBody = nil
            }
            self.acquireUpstream(fresh: false)
        case .respond(let response, let info):
            self.logInfo = info
            guard case .respondLocally(let keepAlive) = self.machine.decided(forward: false) else { return }
            self.queueLocalResponse(response, keepAlive: keepAlive)
            self.finishRequest(keepAlive: self.machine.localResponseWritten())
        }
        if self.pumping { self.repump = true } else { self.pump() }
    }

    /// The upstream request head (`UpstreamRequestPlan`) into `requestHeadBytes`, written in the
    /// loop's head scratch memory first (one copy into the array, no per-field appends).
    private func writeUpstreamHead(_ head: HTTPRequestHead, target: UpstreamTarget) -> BodyEncoding {
        let bound = UpstreamRequestPlan.headBound(
            gateHead: head, client: self.forwardedClient, upstreamHost: target.hostHeader)
        let memory = self.loopContext.headScratch(atLeast: bound)
        var writer = HeadWriter(UnsafeMutableRawBufferPointer(rebasing: memory[0..<bound]))
        let encoding = UpstreamRequestPlan.writeHead(
            gateHead: head, framing: self.requestInfo?.framing ?? .none, bufferedBodyCount: self.bufferedBody?.count,
            client: self.forwardedClient, upstreamHost: target.hostHeader, into: &writer)
        self.requestHeadBytes.removeAll(keepingCapacity: true)
        UnsafeRawBufferPointer(rebasing: memory[0..<writer.count]).withMemoryRebound(to: UInt8.self) {
            self.requestHeadBytes.append(contentsOf: $0)
        }
        return encoding
    }

    // MARK: - Upstream

    private func acquireUpstream(fresh: Bool) {
        guard let target = self.target else { return }
        let pool = target.pools[self.loop.index]
        switch pool.acquire(for: self, fresh: fresh) {
        case .ready(let connection):
            self.attach(connection)
        case .connecting:
            break
        case .queued:
            self.waitingPool = pool
        case .failed:
            self.handleUpstreamFailure(.unavailable, wasIdle: false, anyByte: false)
        case .exhausted:
            self.handleUpstreamFailure(.poolExhausted, wasIdle: false, anyByte: false)
        }
    }

    private func attach(_ connection: UpstreamConnection) {
        self.upstream = connection
        self.machine.upstreamConnected()
        self.upstreamStart = SystemCalls.monotonicNanoseconds()
        connection.parser.expectResponse(toMethod: self.head?.method ?? "GET")
        connection.output.append(self.requestHeadBytes)
        self.repump = true
    }

    /// The whole request is still held (no body streamed): it can be sent again.
    private var requestIsReplayable: Bool {
        self.requestEncoding == .none || self.machine.bufferCap != nil
    }

    private func handleUpstreamFailure(
        _ failure: ProxyConnectionStateMachine.UpstreamFailure, wasIdle: Bool, anyByte: Bool
    ) {
        let action = self.machine.upstreamFailed(
            failure, anyResponseByte: anyByte, wasIdlePooledConnection: wasIdle,
            requestReplayable: self.requestIsReplayable)
        if action != .retry { self.countUpstreamError(failure) }
        switch action {
        case .retry:
            self.acquireUpstream(fresh: true)
        case .respond(let status, let code, let message, let keepAlive):
            self.queueLocalResponse(.jsonError(status: status, code: code, message: message), keepAlive: keepAlive)
            self.finishRequest(keepAlive: self.machine.localResponseWritten())
        case .abort:
            self.abort("upstream failed after the response started")
        }
    }

    private func countUpstreamError(_ failure: ProxyConnectionStateMachine.UpstreamFailure) {
        let kind: String
        switch failure {
        case .unavailable: kind = "unavailable"
        case .timeout: kind = "timeout"
        case .invalidResponse: kind = "invalid_response"
        case .poolExhausted: kind = "pool_exhausted"
        }
        self.server.metrics.upstreamErrors.labels(self.classification?.upstream ?? "-", kind).increment()
    }

    private func releaseUpstream(_ connection: UpstreamConnection, reusable: Bool) {
        if self.upstream === connection { self.upstream = nil }
        connection.pool.release(connection, reusable: reusable)
    }

    private func cancelWaiting() {
        if let pool = self.waitingPool {
            pool.cancelWait(self)
            self.waitingPool = nil
        }
    }

    private var clientIsBackedUp: Bool {
        (self.output?.readableCount ?? 0) > Self.highWaterMark
    }

    private func processUpstreamInput(_ connection: UpstreamConnection) {
        while self.upstream === connection && connection.mayRead && !self.clientIsBackedUp && !self.isClosed {
            let result: IOResult
            let usesScratch: Bool
            let requested: Int
            do {
                (result, usesScratch, requested) = try self.read(from: connection.fd, into: connection.input)
            } catch {
                self.upstreamBroke(connection)
                return
            }
            switch result {
            case .wouldBlock:
                connection.mayRead = false
                return
            case .endOfFile:
                self.upstreamClosed(connection)
                return
            case .processed(let n):
                if n < requested && !connection.sentFIN { connection.mayRead = false }
                if usesScratch {
                    let bytes = UnsafeRawBufferPointer(start: self.loop.scratch.baseAddress, count: n)
                    let consumed = self.parseResponse(bytes, connection)
                    if consumed < n && self.upstream === connection {
                        let rest = UnsafeRawBufferPointer(rebasing: bytes[consumed...])
                        let input = connection.input ?? IOBuffer(capacity: max(4096, rest.count))
                        input.append(rest)
                        connection.input = input
                    }
                } else if let input = connection.input {
                    // Detached while parsing, so that a release inside sees no stale bytes.
                    connection.input = nil
                    let consumed = self.parseResponse(input.readableBytes, connection)
                    input.consume(consumed)
                    if self.upstream === connection && !input.isEmpty { connection.input = input }
                }
            }
        }
    }

    private func parseResponse(_ buffer: UnsafeRawBufferPointer, _ connection: UpstreamConnection) -> Int {
        var offset = 0
        while self.upstream === connection && !self.isClosed {
            let slice = UnsafeRawBufferPointer(rebasing: buffer[offset...])
            if !slice.isEmpty { connection.receivedResponseByte = true }
            let (event, consumed) = connection.parser.next(slice)
            offset += consumed
            guard let event else { break }
            self.handleResponseEvent(event, slice: slice, connection)
        }
        return offset
    }

    private func handleResponseEvent(
        _ event: HTTPResponseEvent, slice: UnsafeRawBufferPointer, _ connection: UpstreamConnection
    ) {
        switch event {
        case .informational(let head):
            // 100 is the gateway's own business (it answered Expect itself); others (103) go to 1.1 clients.
            if head.status != 100 && (self.head?.versionMinor ?? 1) >= 1 {
                var bytes = self.takeScratchBytes()
                HTTPSerializer.writeResponseHead(HeaderRewriting.clientResponse(head), into: &bytes)
                self.queueClientBytes(bytes)
                self.returnScratchBytes(bytes)
                self.machine.responseStartedSending()
            }
        case .head(let head, let info):
            self.responseStatus = head.status
            self.upstreamKeepAlive = info.isKeepAlive
            let plan = ClientResponsePlan.make(
                upstreamHead: head, framing: info.framing, requestMethod: self.head?.method ?? "GET",
                clientVersionMinor: self.head?.versionMinor ?? 1, keepAlive: self.machine.keepAliveAfterResponse)
            self.responseEncoding = plan.encoding
            self.responseCloseAfter = plan.closeAfter
            var bytes = self.takeScratchBytes()
            HTTPSerializer.writeResponseHead(plan.head, into: &bytes)
            self.queueClientBytes(bytes)
            self.returnScratchBytes(bytes)
            self.machine.responseStartedSending()
        case .rawHead(let head, let info):
            // The upstream parser delivers raw heads: the client's head is copied from its bytes.
            self.responseStatus = head.status
            self.upstreamKeepAlive = info.isKeepAlive
            let output = self.output ?? self.loopContext.takeBuffer()
            self.output = output
            (self.responseEncoding, self.responseCloseAfter) = ClientResponsePlan.writeHead(
                head, in: slice, framing: info.framing, requestMethod: self.head?.method ?? "GET",
                clientVersionMinor: self.head?.versionMinor ?? 1, keepAlive: self.machine.keepAliveAfterResponse,
                into: output)
            self.machine.responseStartedSending()
        case .body(let range):
            let bytes = UnsafeRawBufferPointer(rebasing: slice[range])
            switch self.responseEncoding {
            case .chunked:
                var framing = self.takeScratchBytes()
                HTTPSerializer.writeChunk(bytes, into: &framing)
                self.queueClientBytes(framing)
                self.returnScratchBytes(framing)
            case .identity, .none:
                self.queueClientBytes(bytes)
            }
        case .end(let trailers):
            if self.responseEncoding == .chunked {
                var framing = self.takeScratchBytes()
                HTTPSerializer.writeLastChunk(trailers: HeaderRewriting.forwardedTrailers(trailers), into: &framing)
                self.queueClientBytes(framing)
                self.returnScratchBytes(framing)
            }
            self.responseEnded(connection)
        case .error:
            self.upstreamBroke(connection, invalid: true)
        }
    }

    private func responseEnded(_ connection: UpstreamConnection) {
        if self.upstreamStart != 0, let name = self.classification?.upstream {
            let elapsed = SystemCalls.monotonicNanoseconds() &- self.upstreamStart
            self.upstreamDurationMetric(name).observe(nanoseconds: elapsed)
        }
        switch self.machine.responseEnded(upstreamKeepAlive: self.upstreamKeepAlive) {
        case .finish(let reusable, let keepAlive):
            connection.responseCompleteAndReusable = reusable
            self.releaseUpstream(connection, reusable: reusable)
            self.finishRequest(keepAlive: keepAlive && !self.responseCloseAfter)
        case .finishAndClose:
            self.releaseUpstream(connection, reusable: false)
            self.finishRequest(keepAlive: false)
        }
    }

    /// The upstream closed its side.
    private func upstreamClosed(_ connection: UpstreamConnection) {
        if let event = connection.parser.peerClosed() {
            switch event {
            case .end:
                self.handleResponseEvent(event, slice: UnsafeRawBufferPointer(start: nil, count: 0), connection)
                return
            default:
                break
            }
        }
        self.upstreamBroke(connection)
    }

    /// Reset, closed early, or an invalid response.
    private func upstreamBroke(_ connection: UpstreamConnection, invalid: Bool = false) {
        let wasIdle = connection.isReused
        let anyByte = connection.receivedResponseByte
        self.releaseUpstream(connection, reusable: false)
        self.handleUpstreamFailure(invalid ? .invalidResponse : .unavailable, wasIdle: wasIdle, anyByte: anyByte)
    }

    // MARK: - Output

    private func takeScratchBytes() -> [UInt8] {
        var bytes: [UInt8] = []
        swap(&bytes, &self.loopContext.scratchBytes)
        bytes.removeAll(keepingCapacity: true)
        return bytes
    }

    private func returnScratchBytes(_ bytes: [UInt8]) {
        var bytes = bytes
        bytes.removeAll(keepingCapacity: true)
        self.loopContext.scratchBytes = bytes
    }

    private func queueClientBytes(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { self.queueClientBytes($0) }
    }

    private func queueClientBytes(_ bytes: UnsafeRawBufferPointer) {
        let output = self.output ?? self.loopContext.takeBuffer()
        output.append(bytes)
        self.output = output
    }

    private func queueLocalResponse(_ response: LocalResponse, keepAlive: Bool) {
        self.responseStatus = response.status
        var bytes = self.takeScratchBytes()
        // HEAD: the Content-Length a GET would get, no body (RFC 9110 9.3.2).
        HTTPSerializer.writeLocalResponse(
            status: response.status, headers: response.headers, body: response.body, keepAlive: keepAlive,
            omitBody: self.head?.method == "HEAD", into: &bytes)
        self.queueClientBytes(bytes)
        self.returnScratchBytes(bytes)
    }

    private func flushClient() {
        guard let output = self.output else { return }
        while !output.isEmpty {
            let readable = output.readableBytes
            do {
                switch try SystemCalls.write(self.fd, readable.baseAddress!, count: readable.count) {
                case .processed(let n):
                    output.consume(n)
                    // Room again: the upstream may be read further.
                    if output.readableCount <= Self.highWaterMark && self.upstream?.mayRead == true {
                        self.repump = true
                    }
                case .wouldBlock, .endOfFile:
                    if !self.clientWriteInterest {
                        self.clientWriteInterest = true
                        self.loop.setWritableInterest(fd: self.fd, token: self.token, true)
                    }
                    return
                }
            } catch {
                self.abort("client write error")
                return
            }
        }
        self.output = nil
        self.loopContext.returnBuffer(output)
        if self.clientWriteInterest {
            self.clientWriteInterest = false
            self.loop.setWritableInterest(fd: self.fd, token: self.token, false)
        }
    }

    private func flushUpstream() {
        guard let upstream = self.upstream, upstream.state == .leased, !upstream.output.isEmpty else { return }
        let wasBackedUp = self.upstreamIsBackedUp
        if !upstream.flush() {
            self.upstreamBroke(upstream)
            return
        }
        if wasBackedUp && !self.upstreamIsBackedUp { self.repump = true }
    }

    // MARK: - End of a request, end of the connection

    /// Access log, metrics, and the next request (or closing).
    private func finishRequest(keepAlive: Bool) {
        let now = SystemCalls.monotonicNanoseconds()
        let total = self.requestStart == 0 ? 0 : now &- self.requestStart
        let upstreamTime: UInt64? = self.upstreamStart == 0 ? nil : now &- self.upstreamStart
        let route = self.classification?.routeName ?? "-"
        let handles = self.routeMetrics(route)
        handles.byStatusClass[ProxyMetrics.statusClass(self.responseStatus)].increment()
        handles.duration.observe(nanoseconds: total)
        if self.loopContext.accessLog != nil {
            self.loopContext.logBuffer.append(
                AccessLogBuffer.Entry(
                    method: self.head?.method ?? "-", path: self.head?.path ?? "-", route: route,
                    status: self.responseStatus, verdict: self.logInfo?.verdict ?? "-",
                    keyIDPrefix: self.logInfo?.keyIDPrefix, upstreamNanoseconds: upstreamTime, totalNanoseconds: total,
                    arm: self.logInfo?.arm))
        }
        self.head = nil
        self.requestInfo = nil
        self.classification = nil
        self.bufferedBody = nil
        self.releaseBodyReservation()
        // A buffered body went out through these bytes: do not keep its capacity for the
        // connection's lifetime (it is outside the budget once released).
        if self.requestHeadBytes.capacity > Self.retainedHeadBytesCapacity { self.requestHeadBytes = [] }
        self.logInfo = nil
        self.target = nil
        self.requestStart = 0
        self.upstreamStart = 0
        self.responseCloseAfter = false
        self.requestEncoding = .none
        self.responseEncoding = .none
        self.machine.exchangeFinished(keepAlive: keepAlive)
        self.timerKind = nil
        if keepAlive { self.repump = true }
    }

    /// The snapshot's upstream named `name`; the last one again without a dictionary lookup.
    private func upstreamTarget(_ name: String) -> UpstreamTarget? {
        if let cached = self.lastTarget, cached.name == name { return cached.target }
        guard let target = self.snapshot.upstreams.targets[name] else { return nil }
        self.lastTarget = (name, target)
        return target
    }

    /// The route's metric handles: the last route's again without a dictionary lookup (a
    /// keep-alive connection usually stays on one route).
    private func routeMetrics(_ route: String) -> ProxyMetricsCache.RouteHandles {
        if let cached = self.lastRouteMetrics, cached.name == route { return cached.handles }
        let handles = self.loopContext.metricsCache.route(route)
        self.lastRouteMetrics = (route, handles)
        return handles
    }

    private func upstreamDurationMetric(_ upstream: String) -> Histogram {
        if let cached = self.lastUpstreamMetric, cached.name == upstream { return cached.histogram }
        let histogram = self.loopContext.metricsCache.upstreamDuration(upstream)
        self.lastUpstreamMetric = (upstream, histogram)
        return histogram
    }

    /// Shutdown began: idle connections close now, busy ones after their response.
    func beginDrain() {
        guard !self.isClosed else { return }
        if self.machine.drain() && (self.input?.isEmpty ?? true) && (self.output?.isEmpty ?? true) {
            self.close("close after a half-closed client")
        }
    }

    /// Output is flushed and the connection must close: half-close our side and discard
    /// what the client still sends for a moment, so that it reads our response instead of
    /// a reset (lingering close, as nginx does).
    private func startClosing() {
        if self.clientReadClosed || self.isLingering {
            self.close("done")
            return
        }
        if let upstream = self.upstream { self.releaseUpstream(upstream, reusable: false) }
        self.cancelWaiting()
        self.isLingering = true
        shutdown(self.fd, Int32(SHUT_WR))
        self.loop.setDeadline(token: self.token, after: Self.lingerNanoseconds)
        self.discardInput()
    }

    /// Something broke: close both sides now.
    private func abort(_ why: String) {
        self.close("abort: " + why)
    }

    func forceClose() {
        self.close("shutdown")
    }

    /// `ATTEST_GATEWAY_TRACE=1`: every connection close is logged with its reason (debugging).
    static let tracing = getenv("ATTEST_GATEWAY_TRACE") != nil

    private func close(_ why: String) {
        guard !self.isClosed else { return }
        if Self.tracing {
            Log.warning(
                "connection_closed",
                [
                    ("reason", why), ("phase", "\(self.machine.phase)"),
                    ("request_complete", "\(self.machine.requestComplete)"),
                ])
        }
        self.isClosed = true
        if let upstream = self.upstream {
            self.upstream = nil
            upstream.pool.release(upstream, reusable: false)
        }
        self.cancelWaiting()
        self.bufferedBody = nil
        self.releaseBodyReservation()
        self.machine.closed()
        self.loop.deregister(fd: self.fd, token: self.token)
        SystemCalls.close(self.fd)
        if let input = self.input { self.loopContext.returnBuffer(input) }
        if let output = self.output { self.loopContext.returnBuffer(output) }
        self.input = nil
        self.output = nil
        self.loopContext.remove(self)
        self.server.connectionClosed(peerLimitKey: self.peerLimitKey)
    }
}
