import GatewayIO

/// Who owns one stream on an HTTP/2 upstream connection (a client's HTTP/2 stream). Called on
/// the pool's loop, from the upstream connection's own pass, never inside the owner's calls.
protocol HTTP2UpstreamStreamOwner: AnyObject, Sendable {
    /// The pool opened the owner's stream on `connection`.
    func upstreamStreamOpened(_ connection: HTTP2UpstreamConnection, streamID: Int32)
    /// No stream could be opened (connect, TLS or ALPN failure, the waiting queue full).
    func upstreamStreamFailed(_ failure: ProxyConnectionStateMachine.UpstreamFailure)
    /// The final response head (1xx heads are not relayed); `endStream`: nothing follows.
    func upstreamResponseHead(status: Int, fields: [(String, String)], endStream: Bool)
    /// Response body bytes; the owner gives the window back (`consume`) once its client took them.
    func upstreamResponseData(_ bytes: UnsafeRawBufferPointer)
    /// The response is complete (`trailers` empty when it ended with DATA).
    func upstreamResponseEnded(trailers: [(String, String)])
    /// The stream ended before a complete response. `unprocessed`: the upstream says it did not
    /// process it (GOAWAY below its ID, REFUSED_STREAM, a connection that never got it out),
    /// so it may be sent again (RFC 9113 §8.7).
    func upstreamStreamBroke(unprocessed: Bool)
    /// Request body bytes into `buffer`: how many, and whether they are the last; nil: none now.
    func upstreamRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, last: Bool)?
}

/// One connection to an `h2`/`h2c` upstream: an `OutboundConnection` (connect, deadline, TLS
/// with ALPN `h2`) and an `HTTP2ClientSession` over it, carrying up to the upstream's
/// `SETTINGS_MAX_CONCURRENT_STREAMS` streams of any client connections on the same loop.
///
/// Its pass (`pump`) reads what the upstream sent (every stream's frames go to their owners)
/// and writes what the session has, with back-pressure on the socket. Owners never drive the
/// session directly: their `consume`/`resumeBody`/`cancel` schedule a pass on the loop.
///
/// Confined to its pool's loop (`@unchecked Sendable` for the deferred passes).
final class HTTP2UpstreamConnection: OutboundConnectionDelegate, HTTP2ClientSessionDelegate, @unchecked Sendable {
    /// One stream's response as it arrives.
    private final class Exchange {
        var owner: (any HTTP2UpstreamStreamOwner)?
        var status = 0
        var fields: [(String, String)] = []
        var fieldBytes = 0
        var finalHeadSeen = false
        var ended = false

        init(owner: any HTTP2UpstreamStreamOwner) {
            self.owner = owner
        }
    }

    /// Bytes the session may add to the socket's output per pass.
    static let sendChunk = 64 * 1024

    unowned let pool: HTTP2UpstreamPool
    private let outbound: OutboundConnection
    private var session: HTTP2ClientSession!
    private var exchanges: [Int32: Exchange] = [:]
    private var output: [UInt8] = []
    private var pumping = false
    private var repump = false
    private var passScheduled = false
    /// Connected (and ALPN `h2` agreed, with TLS).
    private(set) var isOpen = false
    private(set) var isClosed = false
    /// The upstream's first SETTINGS arrived: its stream limit is known.
    private(set) var settingsReceived = false
    /// The upstream sent GOAWAY: no new streams here; those above `goAwayLastStreamID` were not processed.
    private(set) var goingAway = false
    private var goAwayLastStreamID: Int32 = .max
    /// Closes the connection once it carried no stream for the pool's `idleTimeout`.
    private var idleTimer: LoopTimer?
    /// Liveness (`pingInterval` > 0, while streams are open): when the upstream last sent a
    /// byte, and when our unanswered PING went out (0: none).
    private var lastHeard: UInt64 = 0
    private var pingSent: UInt64 = 0
    private var livenessTimer: LoopTimer?
    /// Why the connection goes, for `attest_gateway_http2_upstream_connections_closed_total`
    /// (the first reason wins; nil when it closes: `error`).
    private var closeReason: HTTP2UpstreamMetrics.CloseReason?

    private init(pool: HTTP2UpstreamPool, outbound: OutboundConnection) {
        self.pool = pool
        self.outbound = outbound
    }

    static func connect(pool: HTTP2UpstreamPool) throws(IOError) -> HTTP2UpstreamConnection {
        let outbound = try OutboundConnection.open(
            to: .tcp(pool.address), tls: pool.tls?.outbound, loop: pool.loop, connectTimeout: pool.connectTimeout,
            delegate: nil)
        let connection = HTTP2UpstreamConnection(pool: pool, outbound: outbound)
        connection.session = HTTP2ClientSession(delegate: connection)
        outbound.attach(connection)
        if outbound.isOpen {
            // Connected at once (a plain connect): opened on the loop's next turn, as any other.
            pool.loop.execute { connection.opened() }
        }
        return connection
    }

    /// Streams open (or submitted) on this connection.
    var streamCount: Int { self.exchanges.count }

    /// Whether another stream may be opened here now.
    var hasRoom: Bool {
        self.isOpen && !self.isClosed && !self.goingAway && self.settingsReceived && self.session.acceptsStreams
            && self.exchanges.count < self.session.maxConcurrentStreams
    }

    /// Opens a stream for `owner`; false when the session refused it (the caller tries elsewhere).
    func start(_ fields: [(String, String)], hasBody: Bool, owner: any HTTP2UpstreamStreamOwner) -> Bool {
        guard let streamID = self.session.request(fields, hasBody: hasBody) else { return false }
        self.idleTimer?.cancel()
        self.idleTimer = nil
        if self.exchanges.isEmpty { self.armLiveness() }
        self.pool.counters?.streams.increment()
        self.exchanges[streamID] = Exchange(owner: owner)
        owner.upstreamStreamOpened(self, streamID: streamID)
        self.schedulePass()
        return true
    }

    /// `count` response bytes of `streamID` reached the client: its window reopens.
    func consume(_ streamID: Int32, _ count: Int) {
        guard !self.isClosed, count > 0 else { return }
        self.session.consume(streamID, count)
        self.schedulePass()
    }

    /// The request body of `streamID` has more bytes (or its end).
    func resumeBody(_ streamID: Int32) {
        guard !self.isClosed else { return }
        self.session.resume(streamID)
        self.schedulePass()
    }

    /// The owner gave up on `streamID` (its client went, a deadline passed): RST_STREAM CANCEL.
    func cancel(_ streamID: Int32) {
        guard !self.isClosed, let exchange = self.exchanges[streamID] else { return }
        exchange.owner = nil
        self.session.reset(streamID, .cancel)
        self.schedulePass()
    }

    /// Reload or shutdown: no new streams; the connection closes once its streams ended.
    func drain() {
        guard !self.isClosed else { return }
        self.goingAway = true
        if self.closeReason == nil { self.closeReason = .drained }
        if self.exchanges.isEmpty {
            self.close()
        } else {
            self.session.goAway()
            self.schedulePass()
        }
    }

    /// No stream is open: the connection closes after the pool's `idleTimeout` unless one starts.
    private func armIdleTimer() {
        self.idleTimer?.cancel()
        guard !self.isClosed, !self.goingAway, self.exchanges.isEmpty else {
            self.idleTimer = nil
            return
        }
        self.idleTimer = self.pool.loop.schedule(after: self.pool.idleTimeout) { [weak self] in
            self?.idleTimedOut()
        }
    }

    /// GOAWAY NO_ERROR, then the connection closes once the frame is written (`pump`).
    private func idleTimedOut() {
        self.idleTimer = nil
        guard !self.isClosed, !self.goingAway, self.exchanges.isEmpty else { return }
        self.goingAway = true
        self.closeReason = .idleTimeout
        if self.isOpen {
            self.session.goAway()
            self.pump()
        } else {
            self.close()
        }
    }

    /// Checks every `pingInterval` while streams are open: silent that long, a PING; silent as
    /// long again after it, the connection is given up (its streams break as on a reset).
    private func armLiveness() {
        guard self.pool.pingInterval > 0, self.livenessTimer == nil, !self.isClosed else { return }
        self.lastHeard = max(self.lastHeard, SystemCalls.monotonicNanoseconds())
        self.livenessTimer = self.pool.loop.schedule(after: self.pool.pingInterval) { [weak self] in
            self?.checkLiveness()
        }
    }

    private func checkLiveness() {
        self.livenessTimer = nil
        guard !self.isClosed, !self.exchanges.isEmpty else { return }
        let now = SystemCalls.monotonicNanoseconds()
        let interval = self.pool.pingInterval
        if self.pingSent != 0 && now &- self.pingSent >= interval {
            if self.closeReason == nil { self.closeReason = .pingTimeout }
            self.broke()
            return
        }
        if self.pingSent == 0 && now &- self.lastHeard >= interval {
            self.pingSent = now
            self.session.ping()
            self.schedulePass()
        }
        self.armLiveness()
    }

    // MARK: - The pass

    private func schedulePass() {
        if self.pumping {
            self.repump = true
            return
        }
        guard !self.passScheduled else { return }
        self.passScheduled = true
        self.pool.loop.execute { [self] in
            self.passScheduled = false
            self.pump()
        }
    }

    func pump() {
        guard self.isOpen, !self.isClosed else { return }
        if self.pumping {
            self.repump = true
            return
        }
        self.pumping = true
        repeat {
            self.repump = false
            self.read()
            if self.isClosed { break }
            self.write()
        } while self.repump && !self.isClosed
        self.pumping = false
        guard !self.isClosed else { return }
        if self.session.isFinished
            || (self.goingAway && self.exchanges.isEmpty && !self.outbound.channel.hasUnsentOutput)
        {
            self.close()
        }
    }

    private func read() {
        let channel = self.outbound.channel
        while channel.mayRead && !self.isClosed {
            let outcome: SocketChannel.ReadOutcome
            do {
                outcome = try channel.readOnce()
            } catch {
                self.broke()
                return
            }
            switch outcome {
            case .wouldBlock:
                return
            case .endOfFile:
                self.broke()
                return
            case .scratch(let bytes):
                self.receive(bytes)
            case .appended:
                guard let input = channel.input else { continue }
                channel.input = nil
                self.receive(input.readableBytes)
                input.consume(input.readableCount)
                self.pool.loop.buffers.give(input)
            }
        }
    }

    private func receive(_ bytes: UnsafeRawBufferPointer) {
        if self.pool.pingInterval > 0 {
            self.lastHeard = SystemCalls.monotonicNanoseconds()
            self.pingSent = 0
        }
        do {
            try self.session.receive(bytes)
        } catch {
            // libnghttp2 queued its GOAWAY where it could: written once, then the connection goes.
            self.write()
            self.broke()
        }
    }

    private func write() {
        guard !self.isClosed else { return }
        while !self.outbound.isBackedUp {
            self.output.removeAll(keepingCapacity: true)
            do {
                try self.session.send(into: &self.output, limit: Self.sendChunk)
            } catch {
                self.broke()
                return
            }
            if self.output.isEmpty { break }
            self.outbound.send(self.output)
        }
        if self.output.capacity > 256 * 1024 { self.output = [] }
        do {
            try self.outbound.flush()
        } catch {
            self.broke()
        }
    }

    /// The connection cannot go on: every stream's owner hears it (those the upstream never
    /// processed as `unprocessed`), and the pool lets it go.
    private func broke() {
        guard !self.isClosed else { return }
        let exchanges = self.exchanges
        self.exchanges.removeAll()
        self.close()
        for (streamID, exchange) in exchanges.sorted(by: { $0.key < $1.key }) where !exchange.ended {
            let unprocessed = streamID > self.goAwayLastStreamID
            if unprocessed { self.pool.counters?.unprocessed[.goaway]?.increment() }
            exchange.owner?.upstreamStreamBroke(unprocessed: unprocessed)
        }
    }

    private func close() {
        guard !self.isClosed else { return }
        self.isClosed = true
        self.isOpen = false
        self.idleTimer?.cancel()
        self.idleTimer = nil
        self.livenessTimer?.cancel()
        self.livenessTimer = nil
        self.pool.counters?.closes[self.closeReason ?? .error]?.increment()
        self.outbound.close()
        self.pool.connectionClosed(self)
    }

    private func opened() {
        guard !self.isClosed, !self.isOpen else { return }
        if let tls = self.outbound.tls, tls.negotiatedALPN != "h2" {
            // An `h2` upstream that did not agree on HTTP/2: nothing is sent.
            self.isClosed = true
            self.outbound.close()
            self.pool.connectFailed(self, .invalidResponse)
            return
        }
        self.isOpen = true
        self.armIdleTimer()
        self.pump()
    }

    // MARK: - OutboundConnectionDelegate

    func outboundOpened(_ connection: OutboundConnection) {
        if let tls = connection.tls { self.pool.tlsHandshakeCompleted(resumed: tls.isResumed) }
        self.opened()
    }

    func outboundEvents(_ connection: OutboundConnection, _ events: UInt32) {
        if events & EventLoop.error != 0 {
            self.broke()
            return
        }
        self.pump()
    }

    func outboundFailed(_ connection: OutboundConnection, _ reason: OutboundCloseReason) {
        guard !self.isClosed else { return }
        self.isClosed = true
        let failure: ProxyConnectionStateMachine.UpstreamFailure
        switch reason {
        case .tlsFailed(let error, let verification):
            let tlsFailure = UpstreamTLSFailure(verification)
            self.pool.tlsHandshakeFailed(reason: tlsFailure.reason, error: error.description)
            failure = .tls(tlsFailure)
        case .timedOut(let duringHandshake):
            if duringHandshake { self.pool.tlsHandshakeFailed(reason: "timeout", error: reason.description) }
            failure = .timeout
        case .connectFailed, .closedByOwner:
            failure = .unavailable
        }
        self.pool.connectFailed(self, failure)
    }

    // MARK: - HTTP2ClientSessionDelegate

    func http2ResponseField(_ streamID: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        guard let exchange = self.exchanges[streamID] else { return }
        exchange.fieldBytes += name.count + value.count + 32
        if exchange.fieldBytes > Int(self.session.settings.maxHeaderListSize) {
            self.session.reset(streamID, .protocolError)
            return
        }
        let name = String(decoding: name, as: UTF8.self)
        let value = String(decoding: value, as: UTF8.self)
        if name == ":status" {
            exchange.status = Int(value) ?? 0
        } else if !name.hasPrefix(":") {
            exchange.fields.append((name, value))
        }
    }

    func http2ResponseHeadersEnded(_ streamID: Int32, endStream: Bool) {
        guard let exchange = self.exchanges[streamID] else { return }
        let fields = exchange.fields
        exchange.fields = []
        exchange.fieldBytes = 0
        if !exchange.finalHeadSeen {
            if (100..<200).contains(exchange.status) { return }  // 1xx: not relayed
            guard (200..<600).contains(exchange.status) else {
                self.session.reset(streamID, .protocolError)
                return
            }
            exchange.finalHeadSeen = true
            exchange.ended = endStream
            exchange.owner?.upstreamResponseHead(status: exchange.status, fields: fields, endStream: endStream)
            if endStream { exchange.owner?.upstreamResponseEnded(trailers: []) }
            return
        }
        guard endStream else { return }
        exchange.ended = true
        exchange.owner?.upstreamResponseEnded(trailers: fields)
    }

    func http2ResponseData(_ streamID: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let exchange = self.exchanges[streamID], let owner = exchange.owner else {
            self.session.consume(streamID, bytes.count)
            return
        }
        owner.upstreamResponseData(bytes)
    }

    func http2ResponseDataEnded(_ streamID: Int32) {
        guard let exchange = self.exchanges[streamID], !exchange.ended else { return }
        exchange.ended = true
        exchange.owner?.upstreamResponseEnded(trailers: [])
    }

    func http2UpstreamStreamClosed(_ streamID: Int32, errorCode: UInt32) {
        guard let exchange = self.exchanges.removeValue(forKey: streamID) else { return }
        if !exchange.ended {
            // libnghttp2 closes the streams above a GOAWAY's last ID with REFUSED_STREAM too.
            let aboveGoAway = streamID > self.goAwayLastStreamID
            let unprocessed = aboveGoAway || errorCode == HTTP2ErrorCode.refusedStream.rawValue
            if unprocessed { self.pool.counters?.unprocessed[aboveGoAway ? .goaway : .refusedStream]?.increment() }
            exchange.owner?.upstreamStreamBroke(unprocessed: unprocessed)
        }
        if self.exchanges.isEmpty { self.armIdleTimer() }
        self.pool.roomFreed()
    }

    func http2GoAwayReceived(lastStreamID: Int32, errorCode: UInt32) {
        self.pool.counters?.goaways[HTTP2UpstreamMetrics.GoAwayCode(errorCode)]?.increment()
        if self.closeReason == nil { self.closeReason = .goaway }
        self.goingAway = true
        self.goAwayLastStreamID = lastStreamID
        self.pool.roomFreed()
    }

    func http2SettingsReceived() {
        self.settingsReceived = true
        self.pool.roomFreed()
    }

    func http2RequestBody(_ streamID: Int32, into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, last: Bool)? {
        guard let owner = self.exchanges[streamID]?.owner else { return (0, true) }
        return owner.upstreamRequestBody(into: buffer)
    }
}
