/// One client socket of the gateway on an event loop (to an upstream, to Apple): the
/// non-blocking connect to a resolved address (TCP or Unix), the connect deadline, the
/// optional TLS client handshake, then a `SocketChannel` for the bytes (reads into the
/// loop's scratch memory, buffered output flushed with back-pressure). The owner keeps only
/// its protocol: it hears `OutboundConnectionDelegate`'s events and reads and writes through
/// `channel` once the connection is open.
///
/// The handshake runs from the loop, never inside `open`: even a connect that finished at
/// once waits for its first writable edge, so its failure reaches the owner the usual way.
///
/// The delegate is held strongly until the close (during the connect the loop's registration
/// is the only reference to either); `close` is idempotent and keeps the first reason.
///
/// Confined to its loop's queue; `@exclusivity(unchecked)`: see `ProxyConnection`.
package final class OutboundConnection: EventHandler {
    package let channel: SocketChannel
    let loop: EventLoop
    @exclusivity(unchecked) private var handshake: OutboundHandshake
    @exclusivity(unchecked) private var delegate: (any OutboundConnectionDelegate)?
    /// The TLS session, from the end of the connect on.
    @exclusivity(unchecked) package private(set) var tls: TLSTransport?
    /// Set by the first `close`.
    @exclusivity(unchecked) package private(set) var closeReason: OutboundCloseReason?

    /// Output beyond this many unsent bytes should make the owner stop producing until a
    /// flush brings it back under (the same mark as the client side's).
    package static let highWaterMark = 256 * 1024

    private init(channel: SocketChannel, loop: EventLoop, tls: OutboundTLS?) {
        self.channel = channel
        self.loop = loop
        self.handshake = OutboundHandshake(tls: tls)
    }

    /// Opens a socket to `endpoint` and starts connecting; `connectTimeout` (ns) bounds the
    /// connect and the handshake together. A plain connect that finished at once is open on
    /// return (`isOpen`, no `outboundOpened`); otherwise the delegate hears how it went.
    package static func open(
        to endpoint: OutboundEndpoint, tls: OutboundTLS?, loop: EventLoop, connectTimeout: UInt64?,
        delegate: (any OutboundConnectionDelegate)?
    ) throws(IOError) -> OutboundConnection {
        loop.assertInLoop()
        let (fd, connected) = try endpoint.openSocket()
        let connection = OutboundConnection(
            channel: SocketChannel(transport: PlainTransport(fd: fd), loop: loop), loop: loop, tls: tls)
        let isOpen = connected && connection.handshake.connectedAtOnce()
        // Registered after the connect: an unconnected socket polls as EPOLLOUT|EPOLLHUP.
        do throws(IOError) {
            try connection.channel.register(handler: connection, writable: !isOpen)
        } catch {
            SystemCalls.close(fd)
            connection.closeReason = .connectFailed(error)
            throw error
        }
        connection.delegate = delegate
        if !isOpen, let connectTimeout {
            loop.setDeadline(token: connection.channel.token, after: connectTimeout)
        }
        return connection
    }

    /// A connection over a byte stream that is connected already (an in-memory pipe in tests):
    /// open on return, with no connect, deadline or handshake.
    package static func open(
        over transport: any ByteTransport, loop: EventLoop, delegate: (any OutboundConnectionDelegate)?
    ) throws(IOError) -> OutboundConnection {
        loop.assertInLoop()
        let connection = OutboundConnection(
            channel: SocketChannel(transport: transport, loop: loop), loop: loop, tls: nil)
        let isOpen = connection.handshake.connectedAtOnce()
        precondition(isOpen, "a plain connection that is not open at once")
        do throws(IOError) {
            try connection.channel.register(handler: connection, writable: false)
        } catch {
            transport.close()
            connection.closeReason = .connectFailed(error)
            throw error
        }
        connection.delegate = delegate
        return connection
    }

    /// The delegate of a connection opened without one: an owner that keeps the connection in a
    /// `let` is made after it. Called before the loop's next turn, so no event is missed.
    package func attach(_ delegate: any OutboundConnectionDelegate) {
        self.loop.assertInLoop()
        precondition(self.delegate == nil && self.closeReason == nil, "an outbound connection attached twice")
        self.delegate = delegate
    }

    package var isOpen: Bool { self.handshake.phase == .open && self.closeReason == nil }
    package var isClosed: Bool { self.closeReason != nil }

    // MARK: - Output

    /// Queues bytes; they go out with the next `flush` (once the connection is open).
    package func send(_ bytes: UnsafeRawBufferPointer) {
        self.channel.queue(bytes)
    }

    package func send(_ bytes: [UInt8]) {
        self.channel.queue(bytes)
    }

    /// Bytes queued and not yet written.
    package var unsentCount: Int { self.channel.unsentCount }

    /// More unsent output than `highWaterMark`: the producer should wait for a flush.
    package var isBackedUp: Bool { self.channel.unsentCount > Self.highWaterMark }

    /// Writes queued output until the socket would block (write interest follows what is
    /// left). Before the connection is open nothing is written.
    package func flush() throws(TransportError) {
        guard self.isOpen else { return }
        try self.channel.flush()
    }

    // MARK: - Closing

    /// Deregisters and closes the socket and drops the delegate. Idempotent: only the first
    /// reason is kept.
    package func close(_ reason: OutboundCloseReason = .closedByOwner) {
        self.loop.assertInLoop()
        guard self.closeReason == nil else { return }
        self.closeReason = reason
        self.delegate = nil
        self.channel.close()
    }

    // MARK: - EventHandler

    package func handleEvents(_ events: UInt32) {
        self.loop.assertInLoop()
        guard self.closeReason == nil else { return }
        self.channel.noteEvents(events)
        if self.handshake.phase == .open {
            self.delegate?.outboundEvents(self, events)
            return
        }
        let finished = events & (EventLoop.writable | EventLoop.readable) != 0
        while true {
            let wasConnecting = self.handshake.phase == .connecting
            switch self.handshake.advance(self.channel.transport, connectFinished: finished) {
            case .wait(let writable):
                self.channel.setWriteInterest(writable)
                return
            case .upgrade(let session):
                self.channel.upgrade(to: session)
                self.tls = session
                self.delegate?.outboundConnected(self)
                guard self.closeReason == nil else { return }
            case .open:
                self.loop.setDeadline(token: self.channel.token, after: nil)
                self.channel.setWriteInterest(false)
                if wasConnecting { self.delegate?.outboundConnected(self) }
                guard self.closeReason == nil else { return }
                self.delegate?.outboundOpened(self)
                return
            case .failed(let reason):
                self.fail(reason)
                return
            }
        }
    }

    /// The connect deadline: a connection still connecting or shaking hands gives up. Open
    /// connections have no deadline here (their owners time their exchanges).
    package func handleDeadline() {
        self.loop.assertInLoop()
        guard self.closeReason == nil, self.handshake.phase != .open else { return }
        self.fail(.timedOut(duringHandshake: self.handshake.phase == .handshaking))
    }

    private func fail(_ reason: OutboundCloseReason) {
        let delegate = self.delegate
        self.close(reason)
        delegate?.outboundFailed(self, reason)
    }
}

@available(*, unavailable)
extension OutboundConnection: Sendable {}
