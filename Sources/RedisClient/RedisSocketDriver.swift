import Dispatch
package import GatewayIO
import Glibc

// File length (~520 lines): the driver's two modes (on an event loop, or on Dispatch sources)
// share one read/write/close path; the decisions are in `RedisWireStateMachine`.

/// TLS for the connections of a `rediss://` store: the client context (trust anchors, client
/// certificate) and the name the server's certificate must carry.
package struct RedisTLS: Sendable {
    package let context: TLSClientContext
    /// SNI and the name checked in the server's certificate; nil: the host connected to
    /// (the URL's host, or the address a sentinel or the cluster map names).
    package let serverName: String?

    package init(context: TLSClientContext, serverName: String? = nil) {
        self.context = context
        self.serverName = serverName
    }
}

/// One socket to Redis, driven by the gateway itself: the connect (TCP or Unix) and the TLS
/// handshake of `rediss://` are the shared outbound steps (`OutboundEndpoint`,
/// `OutboundHandshake`), then a `ByteTransport` (`PlainTransport`, or `TLSTransport`) moves
/// the bytes.
/// Commands are encoded by `RESPWriter` into one output buffer, so every command submitted in
/// one queue turn goes out in one write; replies are parsed by hiredis' `redisReader`
/// (`RedisReplyReader`) and matched to their commands in order by `RedisWireStateMachine`,
/// which also decides what each event means. hiredis does no I/O any more.
///
/// Two modes, as the owning `RedisConnection`; readiness stays here rather than in an
/// `OutboundConnection`, which lives on a loop, because the off-loop mode has no loop:
/// - On an `EventLoop` (the connection lives on the loop's queue): the socket is registered
///   in the loop's epoll, edge-triggered, for the driver's life, so replies are read in the
///   same batches as the loop's client and upstream sockets. `EPOLLOUT` is asked for only while
///   connecting or while output could not be written.
/// - Off-loop: a `DispatchSourceRead` on the connection's queue for the driver's life, and a
///   `DispatchSourceWrite` only while waiting for writability (cancelled, never suspended).
///   The socket is closed once every source on it has run its cancel handler, so a descriptor
///   number reused by the next connection never meets a stale source.
///
/// Closing (`close(reason:)`, an I/O error, end of file, a protocol error) completes every
/// command still awaiting a reply with that reason, then tells the connection
/// (`driverDidClose`), exactly once. Inside reply delivery a close is deferred until the
/// reply being delivered has been handled.
///
/// Confined to `queue` (the owning `RedisConnection`'s queue).
final class RedisSocketDriver: @unchecked Sendable {
    let queue: WorkQueue
    /// The loop whose epoll drives the socket; nil: Dispatch sources on `queue`.
    private let loop: EventLoop?
    /// `host:port` or the socket path, for messages.
    let endpoint: String
    weak var connection: RedisConnection?

    private var machine: RedisWireStateMachine<RedisPendingCommand>
    private let socket: SocketOwner
    private var handshake: OutboundHandshake
    private let usesTLS: Bool
    private let reader: RedisReplyReader
    /// Encoded commands not written yet, from `outputOffset`.
    private var output: [UInt8] = []
    private var outputOffset = 0
    private var isFlushScheduled = false
    /// Inside `pump`: submits are flushed at its end instead of by a scheduled flush.
    private var isPumping = false
    /// Waiting for the socket to become writable (EPOLLOUT interest or a write source).
    private var wantsWritable = false
    /// Inside reply delivery: a close waits here until the current reply is handled.
    private var isDelivering = false
    private var deferredCloseReason: String?
    private var isSocketReleased = false
    /// The TLS handshake failed (verification, protocol): a configuration problem, not an outage.
    private(set) var failedInHandshake = false
    // Loop mode.
    private var loopToken: UInt64?
    // Off-loop mode.
    private var readSource: (any DispatchSourceRead)?
    private var writeSource: (any DispatchSourceWrite)?
    private var readBuffer: UnsafeMutableRawBufferPointer?
    private let counters: RedisConnectionCounters

    private static let readBufferSize = 16 * 1024
    /// The output buffer keeps its storage up to this size between bursts.
    private static let retainedOutputCapacity = 64 * 1024

    private init(
        socket: SocketOwner,
        endpoint: String,
        tls: OutboundTLS?,
        acceptsPushes: Bool,
        reader: RedisReplyReader,
        queue: WorkQueue,
        loop: EventLoop?,
        counters: RedisConnectionCounters
    ) {
        self.socket = socket
        self.endpoint = endpoint
        self.handshake = OutboundHandshake(tls: tls)
        self.usesTLS = tls != nil
        self.reader = reader
        self.queue = queue
        self.loop = loop
        self.counters = counters
        self.machine = RedisWireStateMachine(usesTLS: tls != nil, acceptsPushes: acceptsPushes)
        counters.driverCreated()
    }

    deinit {
        self.readBuffer?.deallocate()
        self.counters.driverDestroyed()
    }

    /// Starts connecting to `address` (on `queue`). A TCP address connects to `resolved`, or to
    /// the host itself when it is an IP literal: the driver never resolves a name (getaddrinfo
    /// blocks; `RedisConnection` asks `HostResolver` first). Returns the reason when no connect
    /// could even start.
    static func connect(
        to address: RedisURL.Address,
        resolved: SocketAddress? = nil,
        tls: RedisTLS?,
        acceptsPushes: Bool = false,
        queue: WorkQueue,
        loop: EventLoop?,
        counters: RedisConnectionCounters
    ) -> Result<RedisSocketDriver, RedisConnectError> {
        assertOnQueue(queue)
        let endpoint = address.endpoint
        let target: OutboundEndpoint
        let serverName: String
        switch address {
        case .tcp(let host, let port):
            guard let socketAddress = resolved ?? SocketAddress(ipLiteral: host, port: port) else {
                let error = IOError("connect (\(host) not resolved)", errno: EDESTADDRREQ)
                return .failure(RedisConnectError("redis \(endpoint): \(error)"))
            }
            target = .tcp(socketAddress)
            serverName = tls?.serverName ?? host
        case .unix(let path):
            target = .unix(path: path)
            serverName = tls?.serverName ?? "localhost"
        }
        let fd: Int32
        do throws(IOError) {
            fd = try target.openSocket().fd
        } catch {
            return .failure(RedisConnectError("redis \(endpoint): \(error)"))
        }
        let socket = SocketOwner(PlainTransport(fd: fd))
        guard let reader = RedisReplyReader() else {
            return .failure(RedisConnectError("redis \(endpoint): cannot allocate a reply reader"))
        }
        let driver = RedisSocketDriver(
            socket: socket, endpoint: endpoint,
            tls: tls.map { OutboundTLS(context: $0.context, serverName: serverName, port: address.port) },
            acceptsPushes: acceptsPushes, reader: reader,
            queue: queue, loop: loop, counters: counters)
        // Wait for writability even when the connect finished at once (loopback, Unix): one
        // path for both, and the first event completes the connect.
        if let loop {
            do throws(IOError) {
                driver.loopToken = try loop.register(fd: fd, handler: driver, writable: true)
                driver.wantsWritable = true
            } catch {
                driver.isSocketReleased = true
                socket.transport.close()
                return .failure(RedisConnectError("redis \(endpoint): cannot watch the socket: \(error)"))
            }
        } else if let dispatchQueue = queue.dispatchQueue {
            driver.readBuffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: dispatchQueue)
            source.setEventHandler { [driver] in driver.pump(readable: true, writable: false, hangup: false) }
            source.setCancelHandler { [socket] in withExtendedLifetime(socket) {} }
            source.activate()
            driver.readSource = source
            driver.setWantsWritable(true)
        } else {
            preconditionFailure("a Redis connection without a loop has a Dispatch queue of its own")
        }
        return .success(driver)
    }

    var isOpen: Bool { !self.machine.isClosed }

    /// The TLS handshake is in progress (for a connect timeout's message).
    var isHandshaking: Bool {
        if case .handshaking = self.machine.state { return true }
        return false
    }

    // MARK: - Commands

    /// Queues one command for writing. Returns false when the driver is closed (the caller
    /// fails the command).
    func submit(_ command: RedisPendingCommand) -> Bool {
        assertOnQueue(self.queue)
        switch self.machine.submit(command) {
        case .refuse:
            return false
        case .hold:
            RESPWriter.append(command.arguments, to: &self.output)
            return true
        case .write:
            RESPWriter.append(command.arguments, to: &self.output)
            self.scheduleFlush()
            return true
        }
    }

    /// Closes the connection: every command awaiting a reply completes with `reason`, then
    /// the connection hears `driverDidClose`. Idempotent; deferred inside reply delivery.
    func close(reason: String) {
        assertOnQueue(self.queue)
        if self.isDelivering {
            if self.deferredCloseReason == nil { self.deferredCloseReason = reason }
            return
        }
        guard let commands = self.machine.close(reason: reason) else { return }
        self.releaseSocket()
        for command in commands {
            self.finish(command, .connectionClosed(reason))
        }
        self.connection?.driverDidClose(self, reason: reason)
    }

    private func finish(_ command: RedisPendingCommand, _ outcome: RedisPendingCommand.Outcome) {
        if let connection = self.connection {
            connection.commandDidFinish(command, outcome: outcome, driver: self)
        } else {
            command.finish(outcome, timeout: .zero)
        }
    }

    // MARK: - I/O

    /// One readiness event: completes a connect, drives a TLS handshake, reads and delivers
    /// replies, writes pending output.
    private func pump(readable: Bool, writable: Bool, hangup: Bool) {
        guard !self.machine.isClosed else { return }
        self.isPumping = true
        defer { self.isPumping = false }
        // A failed connect may be reported as readable only (off-loop, libdispatch may deliver
        // the error to the read source): every event checks SO_ERROR, and only writability or
        // a hang-up proves the connect finished.
        if self.handshake.phase != .open && !self.advanceHandshake(connectFinished: writable || hangup) { return }
        if readable || hangup {
            self.read(drain: hangup)
        }
        self.flush()
    }

    /// Drives the connect and the TLS handshake; true once commands can be written.
    private func advanceHandshake(connectFinished: Bool) -> Bool {
        while !self.machine.isClosed {
            let wasConnecting = self.handshake.phase == .connecting
            switch self.handshake.advance(self.socket.transport, connectFinished: connectFinished) {
            case .wait(let writable):
                self.setWantsWritable(writable)
                return false
            case .upgrade(let session):
                self.socket.transport = session
                self.setWantsWritable(false)
                _ = self.machine.connectCompleted(error: nil)
            case .open:
                if wasConnecting {
                    self.setWantsWritable(false)
                    _ = self.machine.connectCompleted(error: nil)
                } else {
                    _ = self.machine.handshakeCompleted()
                }
                return true
            case .failed(.connectFailed(let error)):
                if case .close(let reason) = self.machine.connectCompleted(error: "redis \(self.endpoint): \(error)") {
                    self.close(reason: reason)
                }
                return false
            case .failed(let reason):
                self.failedInHandshake = true
                self.close(reason: "redis \(self.endpoint): TLS handshake failed: \(reason)")
                return false
            }
        }
        return false
    }

    /// Reads until the socket would block (or, plain TCP, a short read proved it drained),
    /// feeding the reader and delivering every whole reply.
    private func read(drain: Bool) {
        let buffer = self.loop?.scratch ?? self.readBuffer!
        guard let base = buffer.baseAddress else { return }
        let transport = self.socket.transport
        while !self.machine.isClosed {
            let result: IOResult
            do throws(TransportError) {
                result = try transport.read(into: base, count: buffer.count)
            } catch {
                self.close(reason: "redis \(self.endpoint): \(error)")
                return
            }
            switch result {
            case .processed(let count):
                // Asked now: delivering the replies may write (and a TLS write moves OpenSSL's state).
                let drained = !drain && transport.drained(afterReading: count, of: buffer.count)
                do throws(RedisReplyReader.ReadError) {
                    try self.reader.feed(UnsafeRawBufferPointer(start: base, count: count))
                } catch {
                    self.close(reason: "redis \(self.endpoint): \(error)")
                    return
                }
                self.deliverReplies()
                if drained { return }
            case .wouldBlock:
                if transport.waitsForWritable { self.setWantsWritable(true) }
                return
            case .endOfFile:
                self.close(reason: "redis \(self.endpoint): the server closed the connection")
                return
            }
        }
    }

    private func deliverReplies() {
        self.isDelivering = true
        while !self.machine.isClosed && self.deferredCloseReason == nil {
            let next: RedisReplyReader.Next
            do throws(RedisReplyReader.ReadError) {
                next = try self.reader.nextReply()
            } catch {
                self.deferredCloseReason = "redis \(self.endpoint): \(error)"
                break
            }
            let reply: RedisReply?
            switch next {
            case .needMoreBytes:
                self.isDelivering = false
                return
            case .reply(let value):
                reply = value
            case .unreadable:
                reply = nil
            }
            switch self.machine.replyReceived(isPushMessage: reply.map(Self.isPushMessage) ?? false) {
            case .complete(let command):
                self.finish(command, reply.map { .reply($0) } ?? .malformed)
            case .push:
                if let reply { self.connection?.didReceivePush(reply) }
            case .protocolViolation(let reason):
                self.deferredCloseReason = "redis \(self.endpoint): \(reason)"
            }
        }
        self.isDelivering = false
        if let reason = self.deferredCloseReason {
            self.deferredCloseReason = nil
            self.close(reason: reason)
        }
    }

    /// A Pub/Sub message: `["message", channel, payload]` or `["pmessage", pattern, channel, payload]`.
    private static func isPushMessage(_ reply: RedisReply) -> Bool {
        guard case .array(let items) = reply, case .bulk(let kind) = items.first else { return false }
        return kind == Array("message".utf8) || kind == Array("pmessage".utf8)
    }

    private func scheduleFlush() {
        if self.isPumping || self.isFlushScheduled || self.wantsWritable { return }
        self.isFlushScheduled = true
        self.queue.async { [self] in
            self.isFlushScheduled = false
            self.flush()
        }
    }

    /// Writes pending output until done or the socket would block.
    private func flush() {
        guard self.machine.isReady else { return }
        let transport = self.socket.transport
        guard self.outputOffset < self.output.count else {
            // Nothing to write: writability matters only to a TLS read that must write first.
            self.setWantsWritable(self.usesTLS && transport.waitsForWritable)
            return
        }
        while self.outputOffset < self.output.count {
            let offset = self.outputOffset
            let attempt = self.output.withUnsafeBytes { bytes -> Result<IOResult, TransportError> in
                guard let base = bytes.baseAddress else { return .success(.processed(0)) }
                do throws(TransportError) {
                    return .success(try transport.write(base + offset, count: bytes.count - offset))
                } catch {
                    return .failure(error)
                }
            }
            let result: IOResult
            switch attempt {
            case .success(let value):
                result = value
            case .failure(let error):
                self.close(reason: "redis \(self.endpoint): \(error)")
                return
            }
            switch result {
            case .processed(let count):
                self.outputOffset += count
            case .wouldBlock, .endOfFile:
                // Plain TCP: the socket buffer is full. TLS may wait for a read instead (the
                // read source or epoll's read interest brings the next try).
                self.setWantsWritable(!self.usesTLS || transport.waitsForWritable)
                return
            }
        }
        self.output.removeAll(keepingCapacity: self.output.capacity <= Self.retainedOutputCapacity)
        self.outputOffset = 0
        self.setWantsWritable(false)
    }

    private func setWantsWritable(_ wants: Bool) {
        guard wants != self.wantsWritable, !self.isSocketReleased else { return }
        self.wantsWritable = wants
        if let loop = self.loop {
            guard let token = self.loopToken else { return }
            loop.setWritableInterest(fd: self.socket.transport.fd, token: token, wants)
        } else if wants, let dispatchQueue = self.queue.dispatchQueue {
            let source = DispatchSource.makeWriteSource(fileDescriptor: self.socket.transport.fd, queue: dispatchQueue)
            source.setEventHandler { [self] in self.pump(readable: false, writable: true, hangup: false) }
            source.setCancelHandler { [socket = self.socket] in withExtendedLifetime(socket) {} }
            source.activate()
            self.writeSource = source
        } else {
            self.writeSource?.cancel()
            self.writeSource = nil
        }
    }

    /// Stops watching the socket and closes it (off-loop: once every source let go of it).
    private func releaseSocket() {
        guard !self.isSocketReleased else { return }
        self.isSocketReleased = true
        self.wantsWritable = false
        if let loop = self.loop {
            if let token = self.loopToken {
                loop.deregister(fd: self.socket.transport.fd, token: token)
                self.loopToken = nil
            }
            self.socket.transport.close()
        } else {
            self.readSource?.cancel()
            self.readSource = nil
            self.writeSource?.cancel()
            self.writeSource = nil
            // The last cancel handler's release of `socket` closes it (`SocketOwner.deinit`).
        }
        self.output = []
        self.outputOffset = 0
    }
}

extension RedisSocketDriver: EventHandler {
    /// Loop mode: readiness of the socket.
    func handleEvents(_ events: UInt32) {
        let hangup = events & (EventLoop.hangup | EventLoop.error) != 0
        self.pump(
            readable: events & EventLoop.readable != 0,
            writable: events & EventLoop.writable != 0,
            hangup: hangup)
    }

    /// No deadlines: the connection's timer owns command and connect timeouts.
    func handleDeadline() {}
}

/// Why a connect could not start (resolution, socket, TLS set-up): the message names the
/// endpoint.
struct RedisConnectError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The transport (and so the socket) of one driver, closed when the last holder lets go:
/// the driver and, off-loop, every Dispatch source's cancel handler.
private final class SocketOwner: @unchecked Sendable {
    /// Plain until the connect completes; TLS from then on (`rediss://`).
    var transport: any ByteTransport
    init(_ transport: any ByteTransport) { self.transport = transport }
    deinit { self.transport.close() }
}

extension RedisURL.Address {
    /// `host:port` (`[v6]:port`) or the socket path, for messages.
    var endpoint: String {
        switch self {
        case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .unix(let path): path
        }
    }

    /// The TCP port; 0 for a Unix socket.
    var port: Int {
        if case .tcp(_, let port) = self { return Int(port) }
        return 0
    }
}
