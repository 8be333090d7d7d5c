import GatewayIO
import HTTP1

/// Who holds an upstream connection (or waits for one) and takes its response.
protocol UpstreamLessee: AnyObject, Sendable {
    /// A connection is connected and leased to the lessee (it sends its request now).
    func upstreamReady(_ connection: UpstreamConnection)
    /// Connecting failed, or the pool could not serve the lessee.
    func upstreamFailed(_ failure: ProxyConnectionStateMachine.UpstreamFailure)
    /// Events on the leased connection's socket: the lessee pumps (`relayResponse`, `flushRequest`).
    func upstreamEvents(_ connection: UpstreamConnection)
    /// Whether the lessee takes response bytes now (its client is not backed up).
    var acceptsResponseBytes: Bool { get }
    /// One response event; `slice` is the memory the event's ranges point into.
    func upstreamResponse(
        _ event: HTTPResponseEvent, in slice: UnsafeRawBufferPointer, from connection: UpstreamConnection)
    /// The connection broke (reset, read error, closed before a complete response).
    func upstreamBroke(_ connection: UpstreamConnection)
}

/// One connection to an upstream: connecting, shaking hands (`https://`), idle in its pool, or
/// leased to one client connection. While leased it writes the request its lessee queues and
/// reads, parses and hands over the response (`relayResponse`); the lessee never touches its
/// socket or parser.
///
/// The socket, its connect deadline and its TLS handshake are an `OutboundConnection`'s; only
/// a connection that finished its handshake is leased, so a handshake failure is answered
/// with its own code (`UpstreamTLSFailure`) and never retried.
///
/// Confined to its pool's loop (`@unchecked Sendable` for the pool's deferred hand-overs);
/// `@exclusivity(unchecked)`: see `ProxyConnection`.
final class UpstreamConnection: OutboundConnectionDelegate, @unchecked Sendable {
    enum State { case connecting, idle, leased, closed }

    unowned let pool: UpstreamPool
    /// The socket, its connect deadline and handshake; its channel is `channel`.
    private let outbound: OutboundConnection
    /// The socket's bytes (a stored `let`: read several times per exchange).
    let channel: SocketChannel
    @exclusivity(unchecked) private(set) var state: State = .connecting
    @exclusivity(unchecked) private(set) var lessee: (any UpstreamLessee)?
    @exclusivity(unchecked) private var parser = HTTPResponseParser.forProxy()
    /// The lease came from the idle pool (it served a request before).
    @exclusivity(unchecked) private(set) var isReused = false
    /// A response byte arrived during the current lease.
    @exclusivity(unchecked) private(set) var receivedResponseByte = false

    private init(pool: UpstreamPool, outbound: OutboundConnection) {
        self.pool = pool
        self.outbound = outbound
        self.channel = outbound.channel
    }

    /// The TLS session (`https://` upstreams), from the end of the connect on.
    var tls: TLSTransport? { self.outbound.tls }

    static func connect(to address: SocketAddress, pool: UpstreamPool, lessee: any UpstreamLessee) throws(IOError)
        -> UpstreamConnection
    {
        let outbound: OutboundConnection
        if let factory = pool.transportFactory {
            outbound = try OutboundConnection.open(over: factory(address), loop: pool.loop, delegate: nil)
        } else {
            outbound = try OutboundConnection.open(
                to: .tcp(address), tls: pool.tls?.outbound, loop: pool.loop, connectTimeout: pool.connectTimeout,
                delegate: nil)
        }
        let connection = UpstreamConnection(pool: pool, outbound: outbound)
        outbound.attach(connection)
        connection.lessee = lessee
        if outbound.isOpen { connection.state = .leased }
        return connection
    }

    /// Nothing of the last exchange is left: no unread response byte, no unsent request byte.
    var isCleanForReuse: Bool {
        self.state == .leased && (self.channel.input?.isEmpty ?? true) && !self.channel.hasUnsentOutput
    }

    func lease(to lessee: any UpstreamLessee, reused: Bool) {
        self.lessee = lessee
        self.state = .leased
        self.isReused = reused
        self.receivedResponseByte = false
    }

    func becomeIdle() {
        self.lessee = nil
        self.state = .idle
        self.channel.releaseBuffers()
        // Its TLS record buffers go at the first tick it spends unused in the pool.
        if let tls = self.tls, let sweep = self.pool.bufferSweep { sweep.note(tls) }
        self.pool.loop.setDeadline(token: self.channel.token, after: nil)
    }

    func closeSocket() {
        guard self.state != .closed else { return }
        self.state = .closed
        self.lessee = nil
        self.outbound.close()
    }

    /// Left its pool for a tunnel (`UpstreamPool.detach`): its lessee owns it until it closes.
    @exclusivity(unchecked) private(set) var isDetached = false

    func detach() {
        self.isDetached = true
    }

    /// Closes a connection that left its pool (the pool no longer counts it).
    func closeDetached() {
        precondition(self.isDetached, "closeDetached on a pooled connection")
        self.closeSocket()
    }

    // MARK: - The exchange

    /// Starts an exchange: `request` goes out, and a response to `method` is expected (a 101
    /// only when `upgrade`: the request asks to switch protocols).
    func send(request: [UInt8], method: String, upgrade: Bool = false) {
        self.parser.expectResponse(toMethod: method, upgrade: upgrade)
        self.channel.queue(request)
    }

    /// More request bytes (a streamed body) for the upstream.
    func send(_ bytes: UnsafeRawBufferPointer) {
        self.channel.queue(bytes)
    }

    func send(_ bytes: [UInt8]) {
        self.channel.queue(bytes)
    }

    /// Request bytes queued and not yet written.
    var unsentRequestBytes: Int { self.channel.unsentCount }

    /// Writes queued request bytes until the socket would block. Returns false on a write
    /// error (the connection is dead).
    func flushRequest() -> Bool {
        guard self.state == .leased, self.channel.hasUnsentOutput else { return true }
        do {
            try self.channel.flush()
            return true
        } catch {
            return false
        }
    }

    /// Reads and parses the response while the lessee takes it; every event goes to the
    /// lessee, which may release this connection in the middle (the loop then stops).
    func relayResponse(to lessee: any UpstreamLessee) {
        while self.lessee === lessee && self.channel.mayRead && lessee.acceptsResponseBytes {
            let outcome: SocketChannel.ReadOutcome
            do {
                outcome = try self.channel.readOnce()
            } catch {
                lessee.upstreamBroke(self)
                return
            }
            switch outcome {
            case .wouldBlock:
                return
            case .endOfFile:
                self.peerClosed(lessee)
                return
            case .scratch(let bytes):
                let consumed = self.parse(bytes, for: lessee)
                if consumed < bytes.count && self.lessee === lessee {
                    self.channel.keep(UnsafeRawBufferPointer(rebasing: bytes[consumed...]))
                }
            case .appended:
                guard let input = self.channel.input else { continue }
                // Detached while parsing, so that a release inside sees no stale bytes.
                self.channel.input = nil
                let consumed = self.parse(input.readableBytes, for: lessee)
                input.consume(consumed)
                if self.lessee === lessee && !input.isEmpty {
                    self.channel.input = input
                } else {
                    self.pool.loop.buffers.give(input)
                }
            }
        }
    }

    private func parse(_ buffer: UnsafeRawBufferPointer, for lessee: any UpstreamLessee) -> Int {
        var offset = 0
        while self.lessee === lessee {
            let slice = UnsafeRawBufferPointer(rebasing: buffer[offset...])
            if !slice.isEmpty { self.receivedResponseByte = true }
            let (event, consumed) = self.parser.next(slice)
            offset += consumed
            guard let event else { break }
            lessee.upstreamResponse(event, in: slice, from: self)
        }
        return offset
    }

    /// The upstream closed its side: the end of a close-delimited response, or a break.
    private func peerClosed(_ lessee: any UpstreamLessee) {
        if let event = self.parser.peerClosed(), case .end = event {
            lessee.upstreamResponse(event, in: UnsafeRawBufferPointer(start: nil, count: 0), from: self)
            return
        }
        lessee.upstreamBroke(self)
    }

    // MARK: - OutboundConnectionDelegate

    func outboundOpened(_ connection: OutboundConnection) {
        self.pool.loop.assertInLoop()
        if let tls = connection.tls { self.pool.tlsHandshakeCompleted(resumed: tls.isResumed) }
        self.state = .leased
        self.isReused = false
        self.lessee?.upstreamReady(self)
    }

    func outboundEvents(_ connection: OutboundConnection, _ events: UInt32) {
        self.pool.loop.assertInLoop()
        switch self.state {
        case .idle:
            if events & (EventLoop.hangup | EventLoop.error) != 0 {
                self.pool.idleConnectionDied(self)
            } else if events & EventLoop.readable != 0 && !self.consumedTLSRecordsOnly() {
                self.pool.idleConnectionDied(self)
            }
        case .leased:
            self.lessee?.upstreamEvents(self)
        case .connecting, .closed:
            break
        }
    }

    func outboundFailed(_ connection: OutboundConnection, _ reason: OutboundCloseReason) {
        self.pool.loop.assertInLoop()
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
        let lessee = self.lessee
        self.pool.close(self)
        lessee?.upstreamFailed(failure)
    }

    /// An idle TLS connection became readable: a record that is not application data (a TLS
    /// 1.3 session ticket sent late, a key update) is consumed inside OpenSSL and the
    /// connection stays pooled. Anything else (response bytes nobody asked for, close_notify,
    /// an error) means it cannot be reused. Plain TCP: always false.
    private func consumedTLSRecordsOnly() -> Bool {
        guard let transport = self.tls, let base = self.pool.loop.scratch.baseAddress else { return false }
        do {
            return try transport.read(into: base, count: self.pool.loop.scratch.count) == .wouldBlock
        } catch {
            return false
        }
    }
}

extension HTTPResponseParser {
    /// The upstream side's parser: final heads as `.rawHead` (the client's head is written from
    /// the upstream's bytes, see `ClientResponsePlan.writeHead`).
    static func forProxy() -> HTTPResponseParser {
        var parser = HTTPResponseParser()
        parser.deliversRawHeads = true
        return parser
    }
}
