import Dispatch
import GatewayIO
import Glibc

/// The one connection of one event loop to one host (`host:port`: Apple's, Google's), and the queue
/// of requests waiting for it. Runs `OutboundHTTPConnectionStateMachine`'s actions: DNS on a
/// resolver queue (getaddrinfo blocks; never on the loop), then an `OutboundConnection` for
/// the connect, the TLS handshake, and the request and answer bytes on the loop's edges.
/// When the socket closes, the next queued request opens a new one; nothing here blocks the
/// loop.
///
/// Timeouts: each request has one deadline from the moment it is queued (queueing, DNS,
/// connect, handshake, answer: all inside it), an `EventLoop.schedule` on the loop,
/// checked against a sequence number so a late timer does nothing. An
/// idle keep-alive connection is closed after `idleTimeout`.
///
/// Confinement: every member is used only on `loop` (hence `@unchecked Sendable`);
/// `OutboundHTTPClient` hops there with `loop.execute`.
final class OutboundHTTPConnection: OutboundConnectionDelegate, @unchecked Sendable {
    struct Pending {
        var request: OutboundHTTPRequest
        var timeout: Duration
        /// Monotonic ns after which the request fails with `<peer>_timeout`.
        var deadline: UInt64
        var started: UInt64
        var completion: (Result<OutboundHTTPResponse, OutboundHTTPError>) -> Void
    }

    /// Resolves host names (getaddrinfo blocks), one lookup at a time for the process.
    static let resolver = HostResolver(label: "attest-gateway.outbound.resolver")

    let loop: EventLoop
    let host: String
    let port: UInt16
    private let tls: TLSClientContext
    /// nil: a client without a token source (requests with `.clientToken` fail).
    private let tokens: (any OutboundTokenSource)?
    private let metrics: OutboundClientMetrics
    private var peer: OutboundPeer { self.metrics.peer }
    private let idleTimeout: Duration
    private let maximumQueued: Int
    private let maximumBodyBytes: Int
    private var machine: OutboundHTTPConnectionStateMachine
    private var outbound: OutboundConnection?
    private var address: SocketAddress?
    private var current: Pending?
    private var queue: [Pending] = []
    /// Bumped at every request start and when the idle timer is armed: a stale timer or DNS
    /// answer compares it.
    private var sequence: UInt64 = 0
    private var isShutDown = false

    init(
        loop: EventLoop, host: String, port: UInt16, tls: TLSClientContext, tokens: (any OutboundTokenSource)?,
        metrics: OutboundClientMetrics, idleTimeout: Duration, maximumQueued: Int,
        maximumBodyBytes: Int = OutboundResponseReader.defaultMaximumBodyBytes
    ) {
        self.loop = loop
        self.host = host
        self.port = port
        self.tls = tls
        self.tokens = tokens
        self.metrics = metrics
        self.idleTimeout = idleTimeout
        self.maximumQueued = maximumQueued
        self.maximumBodyBytes = maximumBodyBytes
        self.machine = OutboundHTTPConnectionStateMachine(peer: metrics.peer, maximumBodyBytes: maximumBodyBytes)
    }

    /// Whether a socket is open (for tests: keep-alive reuse).
    var isConnected: Bool { self.outbound != nil }
    /// Sockets opened so far (for tests: keep-alive reuse).
    private(set) var connectionsOpened = 0

    /// Queues `request`; `completion` runs on the loop exactly once.
    func enqueue(
        _ request: OutboundHTTPRequest, timeout: Duration,
        completion: @escaping (Result<OutboundHTTPResponse, OutboundHTTPError>) -> Void
    ) {
        self.loop.assertInLoop()
        let now = SystemCalls.monotonicNanoseconds()
        guard !self.isShutDown else {
            completion(.failure(OutboundHTTPError(.unreachable, peer: self.peer, "the gateway is shutting down")))
            return
        }
        guard self.queue.count < self.maximumQueued else {
            completion(
                .failure(
                    OutboundHTTPError(
                        .throttled, peer: self.peer, "more than \(self.maximumQueued) calls to \(self.host) queued")))
            return
        }
        self.queue.append(
            Pending(
                request: request, timeout: timeout, deadline: now &+ Self.nanoseconds(timeout), started: now,
                completion: completion))
        self.startNext()
    }

    /// Fails every queued request and closes the socket.
    func shutdown() {
        self.loop.assertInLoop()
        self.isShutDown = true
        let action = self.machine.shutdown()
        self.run(action)
        self.closeSocket()
        let waiting = self.queue
        self.queue = []
        for pending in waiting {
            pending.completion(
                .failure(OutboundHTTPError(.unreachable, peer: self.peer, "the gateway is shutting down")))
        }
    }

    // MARK: - Driving the state machine

    private func startNext() {
        while self.current == nil, self.machine.acceptsRequest, !self.queue.isEmpty {
            let pending = self.queue.removeFirst()
            let now = SystemCalls.monotonicNanoseconds()
            if now >= pending.deadline {
                self.finish(
                    pending,
                    .failure(
                        OutboundHTTPError(.timedOut, peer: self.peer, "no answer within \(pending.timeout) (queued)")))
                continue
            }
            let bytes: [UInt8]
            do throws(OutboundHTTPError) {
                bytes = pending.request.serialized(token: try self.clientToken(for: pending.request))
            } catch {
                self.finish(pending, .failure(error))
                continue
            }
            self.current = pending
            self.sequence &+= 1
            self.armTimer(sequence: self.sequence, at: pending.deadline)
            self.run(self.machine.start(bytes, method: pending.request.method))
        }
    }

    /// The client's token for a request that needs one (`.clientToken`), else nil.
    private func clientToken(for request: OutboundHTTPRequest) throws(OutboundHTTPError) -> String? {
        guard request.needsClientToken else { return nil }
        guard let tokens = self.tokens else {
            throw OutboundHTTPError(
                .invalidRequest, peer: self.peer, "this client has no token source for \(request.endpoint)")
        }
        return try tokens.currentToken()
    }

    private func run(_ action: OutboundHTTPConnectionStateMachine.Action) {
        switch action {
        case .none, .wait:
            break
        case .resolve:
            self.resolve()
        case .connect:
            self.connect()
        case .write(let offset):
            self.write(from: offset)
        case .reconnect:
            self.closeSocket()
            self.resolve()
        case .close:
            self.closeSocket()
            self.machine = OutboundHTTPConnectionStateMachine(peer: self.peer, maximumBodyBytes: self.maximumBodyBytes)
            self.startNext()
        case .complete(let result, let keepConnection):
            // The server answered before the whole request was out: the rest must not precede the next one.
            if !keepConnection || self.outbound?.unsentCount ?? 0 > 0 {
                self.closeSocket()
                self.machine = OutboundHTTPConnectionStateMachine(
                    peer: self.peer, maximumBodyBytes: self.maximumBodyBytes)
            } else {
                self.armIdleTimer()
            }
            // The peer refused the client's token: the next call signs a new one (after a key or
            // clock fix).
            if case .success(let response) = result, response.status == 401,
                self.current?.request.needsClientToken == true
            {
                self.tokens?.invalidate()
            }
            if let pending = self.current {
                self.current = nil
                self.finish(pending, result)
            }
            self.startNext()
        }
    }

    private func finish(_ pending: Pending, _ result: Result<OutboundHTTPResponse, OutboundHTTPError>) {
        let elapsed = SystemCalls.monotonicNanoseconds() &- pending.started
        self.metrics.record(service: pending.request.service, result: result, nanoseconds: elapsed)
        pending.completion(result)
    }

    private func resolve() {
        if self.address != nil {
            // The address of the last connection is kept: DNS only for the first connection
            // and after a connect failure (which clears it).
            self.run(self.machine.resolved())
            return
        }
        let sequence = self.sequence
        let host = self.host
        let port = self.port
        Self.resolver.resolve(host: host, port: port) { result in
            self.loop.execute {
                guard sequence == self.sequence else { return }
                switch result {
                case .success(let address):
                    self.address = address
                    self.run(self.machine.resolved())
                case .failure(let error):
                    self.run(self.machine.failed("\(error)"))
                }
            }
        }
    }

    private func connect() {
        guard let address = self.address else { return }
        do {
            self.outbound = try OutboundConnection.open(
                to: .tcp(address), tls: OutboundTLS(context: self.tls, serverName: self.host, port: Int(self.port)),
                loop: self.loop, connectTimeout: nil, delegate: self)
            self.connectionsOpened += 1
        } catch {
            self.address = nil
            self.run(self.machine.failed("\(error)"))
        }
    }

    /// Queues the request from `offset` unless its rest is queued already (the channel's
    /// unsent bytes are always the request's rest), then writes what the socket takes.
    private func write(from offset: Int) {
        guard let outbound = self.outbound else { return }
        if outbound.unsentCount == 0 {
            let request = self.machine.request
            guard offset < request.count else {
                self.run(self.machine.wrote(0))
                return
            }
            request.withUnsafeBytes { outbound.send(UnsafeRawBufferPointer(rebasing: $0[offset...])) }
        }
        let before = outbound.unsentCount
        do throws(TransportError) {
            try outbound.flush()
        } catch {
            self.transportFailed(error)
            return
        }
        self.run(self.machine.wrote(before - outbound.unsentCount))
        // The answer may be readable already (without a new edge, the handshake having read it).
        if self.machine.state == .receiving { self.readAll() }
    }

    /// Reads until the socket would block, whatever `mayRead` says: an answer is a few
    /// records, and one read too many costs nothing next to a missed one.
    private func readAll() {
        guard let outbound = self.outbound else { return }
        while self.outbound === outbound {
            let outcome: SocketChannel.ReadOutcome
            do {
                outcome = try outbound.channel.readOnce()
            } catch {
                self.transportFailed(error)
                return
            }
            switch outcome {
            case .scratch(let bytes):
                self.run(self.machine.received([UInt8](bytes)))
            case .appended:
                // Nothing is ever kept: every read goes to the machine whole.
                break
            case .endOfFile:
                self.run(self.machine.peerClosed())
                return
            case .wouldBlock:
                return
            }
        }
    }

    private func transportFailed(_ error: TransportError, verification: TLSVerificationFailure? = nil) {
        switch error {
        case .tls(let reason):
            let detail = (verification ?? self.outbound?.tls?.verificationFailure).map { "\($0)" } ?? reason
            self.run(self.machine.failed(detail, isTLS: true))
        case .system(let error):
            self.run(self.machine.failed("\(error)"))
        }
    }

    private func closeSocket() {
        guard let outbound = self.outbound else { return }
        self.outbound = nil
        outbound.close()
    }

    // MARK: - OutboundConnectionDelegate

    func outboundConnected(_ connection: OutboundConnection) {
        self.loop.assertInLoop()
        self.run(self.machine.connected(errno: 0))
    }

    func outboundOpened(_ connection: OutboundConnection) {
        self.loop.assertInLoop()
        if case .sending(let sent) = self.machine.state { self.write(from: sent) }
    }

    func outboundEvents(_ connection: OutboundConnection, _ events: UInt32) {
        self.loop.assertInLoop()
        switch self.machine.state {
        case .sending(let sent):
            self.write(from: sent)
            if case .sending = self.machine.state, events & EventLoop.readable != 0 { self.readAll() }
        case .receiving, .ready:
            self.readAll()
        case .idle, .resolving, .connecting, .closed:
            break
        }
    }

    func outboundFailed(_ connection: OutboundConnection, _ reason: OutboundCloseReason) {
        self.loop.assertInLoop()
        switch reason {
        case .connectFailed(let error):
            self.address = nil
            self.run(self.machine.connected(errno: error.errno))
        case .tlsFailed(let error, let verification):
            self.transportFailed(error, verification: verification)
        case .timedOut, .closedByOwner:
            self.run(self.machine.failed(reason.description))
        }
    }

    // MARK: - Timers

    private func armTimer(sequence: UInt64, at deadline: UInt64) {
        let now = SystemCalls.monotonicNanoseconds()
        let delay = deadline > now ? deadline - now : 0
        self.loop.schedule(after: delay) {
            guard sequence == self.sequence, let pending = self.current else { return }
            self.run(self.machine.timedOut(after: pending.timeout))
        }
    }

    private func armIdleTimer() {
        self.sequence &+= 1
        let sequence = self.sequence
        self.loop.schedule(after: Self.nanoseconds(self.idleTimeout)) {
            guard sequence == self.sequence, self.current == nil else { return }
            self.run(self.machine.timedOut(after: self.idleTimeout))
        }
    }

    static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(seconds, 0)) &* 1_000_000_000 &+ UInt64(max(attoseconds, 0) / 1_000_000_000)
    }
}
