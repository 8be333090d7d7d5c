import Dispatch
import GatewayIO
import Glibc

/// The one connection of one event loop to one of Apple's hosts (`host:port`), and the queue
/// of requests waiting for it. Runs `AppleConnectionStateMachine`'s actions: DNS on a
/// resolver queue (getaddrinfo blocks; never on the loop), non-blocking connect, TLS through
/// `TLSTransport`, reads and writes on the loop's edges. When the socket closes, the next
/// queued request opens a new one; nothing here blocks the loop.
///
/// Timeouts: each request has one deadline from the moment it is queued (queueing, DNS,
/// connect, handshake, answer: all inside it), an `EventLoop.schedule` on the loop,
/// checked against a sequence number so a late timer does nothing. An
/// idle keep-alive connection is closed after `idleTimeout`.
///
/// Confinement: every member is used only on `loop` (hence `@unchecked Sendable`);
/// `AppleHTTPClient` hops there with `loop.execute`.
final class AppleHTTPConnection: EventHandler, @unchecked Sendable {
    struct Pending {
        var request: AppleHTTPRequest
        var timeout: Duration
        /// Monotonic ns after which the request fails with `apple_timeout`.
        var deadline: UInt64
        var started: UInt64
        var completion: (Result<AppleHTTPResponse, AppleError>) -> Void
    }

    /// Resolves Apple's host names (getaddrinfo blocks), one lookup at a time for the process.
    static let resolver = HostResolver(label: "attest-gateway.apple.resolver")

    let loop: EventLoop
    let host: String
    let port: UInt16
    private let tls: TLSClientContext
    private let jwt: AppleJWTCache
    private let metrics: AppleClientMetrics
    private let idleTimeout: Duration
    private let maximumQueued: Int
    private var machine = AppleConnectionStateMachine()
    private var transport: TLSTransport?
    private var token: UInt64 = 0
    private var isRegistered = false
    private var address: SocketAddress?
    private var current: Pending?
    private var queue: [Pending] = []
    /// Bumped at every request start and when the idle timer is armed: a stale timer or DNS
    /// answer compares it.
    private var sequence: UInt64 = 0
    private var isShutDown = false

    init(
        loop: EventLoop, host: String, port: UInt16, tls: TLSClientContext, jwt: AppleJWTCache,
        metrics: AppleClientMetrics, idleTimeout: Duration, maximumQueued: Int
    ) {
        self.loop = loop
        self.host = host
        self.port = port
        self.tls = tls
        self.jwt = jwt
        self.metrics = metrics
        self.idleTimeout = idleTimeout
        self.maximumQueued = maximumQueued
    }

    /// Whether a socket is open (for tests: keep-alive reuse).
    var isConnected: Bool { self.transport != nil }
    /// Sockets opened so far (for tests: keep-alive reuse).
    private(set) var connectionsOpened = 0

    /// Queues `request`; `completion` runs on the loop exactly once.
    func enqueue(
        _ request: AppleHTTPRequest, timeout: Duration,
        completion: @escaping (Result<AppleHTTPResponse, AppleError>) -> Void
    ) {
        self.loop.assertInLoop()
        let now = SystemCalls.monotonicNanoseconds()
        guard !self.isShutDown else {
            completion(.failure(AppleError(.unreachable, "the gateway is shutting down")))
            return
        }
        guard self.queue.count < self.maximumQueued else {
            completion(.failure(AppleError(.throttled, "more than \(self.maximumQueued) calls to \(self.host) queued")))
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
            pending.completion(.failure(AppleError(.unreachable, "the gateway is shutting down")))
        }
    }

    // MARK: - Driving the state machine

    private func startNext() {
        while self.current == nil, self.machine.acceptsRequest, !self.queue.isEmpty {
            let pending = self.queue.removeFirst()
            let now = SystemCalls.monotonicNanoseconds()
            if now >= pending.deadline {
                self.finish(pending, .failure(AppleError(.timedOut, "no answer within \(pending.timeout) (queued)")))
                continue
            }
            let bytes: [UInt8]
            do {
                bytes = pending.request.serialized(jwt: try self.jwt.token())
            } catch {
                self.finish(pending, .failure(error))
                continue
            }
            self.current = pending
            self.sequence &+= 1
            self.armTimer(sequence: self.sequence, at: pending.deadline)
            self.run(self.machine.start(bytes))
        }
    }

    private func run(_ action: AppleConnectionStateMachine.Action) {
        switch action {
        case .none, .wait:
            self.updateWriteInterest()
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
            self.machine = AppleConnectionStateMachine()
            self.startNext()
        case .complete(let result, let keepConnection):
            if !keepConnection {
                self.closeSocket()
                self.machine = AppleConnectionStateMachine()
            } else {
                self.armIdleTimer()
            }
            // Apple refused the JWT: the next call signs a new one (after a key or clock fix).
            if case .success(let response) = result, response.status == 401 { self.jwt.invalidate() }
            if let pending = self.current {
                self.current = nil
                self.finish(pending, result)
            }
            self.startNext()
        }
    }

    private func finish(_ pending: Pending, _ result: Result<AppleHTTPResponse, AppleError>) {
        let elapsed = SystemCalls.monotonicNanoseconds() &- pending.started
        self.metrics.record(path: pending.request.endpoint.path, result: result, nanoseconds: elapsed)
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
        let fd: Int32
        do {
            fd = try SystemCalls.makeSocket(family: address.family)
        } catch {
            self.run(self.machine.failed("\(error)"))
            return
        }
        do {
            let transport = try TLSTransport(fd: fd, client: self.tls, serverName: self.host, port: Int(self.port))
            self.transport = transport
            self.connectionsOpened += 1
            let done = try SystemCalls.connect(fd, to: address)
            self.token = try self.loop.register(fd: fd, handler: self, writable: !done)
            self.isRegistered = true
            SystemCalls.setNoDelay(fd)
            if done { self.run(self.machine.connected(errno: 0)) }
        } catch {
            if self.transport == nil { SystemCalls.close(fd) }
            self.address = nil
            self.run(self.machine.failed("\(error)"))
        }
    }

    private func write(from offset: Int) {
        guard let transport = self.transport else { return }
        let request = self.machine.request
        guard offset < request.count else {
            self.run(self.machine.wrote(0))
            return
        }
        let outcome: Result<IOResult, TransportError> = request.withUnsafeBytes { raw in
            Result { () throws(TransportError) in
                try transport.write(raw.baseAddress! + offset, count: raw.count - offset)
            }
        }
        let result: IOResult
        switch outcome {
        case .success(let value): result = value
        case .failure(let error):
            self.transportFailed(error)
            return
        }
        switch result {
        case .processed(let count):
            self.run(self.machine.wrote(count))
            // The answer may already be readable (the handshake's reads happened inside write).
            if self.machine.state == .receiving { self.readAll() }
        case .wouldBlock, .endOfFile:
            self.run(self.machine.wrote(0))
        }
    }

    private func readAll() {
        guard let transport = self.transport else { return }
        let scratch = self.loop.scratch
        while self.transport === transport {
            let result: IOResult
            do {
                result = try transport.read(into: scratch.baseAddress!, count: scratch.count)
            } catch {
                self.transportFailed(error)
                return
            }
            switch result {
            case .processed(let count):
                let bytes = [UInt8](UnsafeRawBufferPointer(start: scratch.baseAddress, count: count))
                self.run(self.machine.received(bytes))
            case .endOfFile:
                self.run(self.machine.peerClosed())
                return
            case .wouldBlock:
                self.updateWriteInterest()
                return
            }
        }
    }

    private func transportFailed(_ error: TransportError) {
        switch error {
        case .tls(let reason):
            let detail = self.transport?.verificationFailure.map { "\($0)" } ?? reason
            self.run(self.machine.failed(detail, isTLS: true))
        case .system(let error):
            self.run(self.machine.failed("\(error)"))
        }
    }

    private func updateWriteInterest() {
        guard self.isRegistered, let transport = self.transport else { return }
        let wantsWrite: Bool
        switch self.machine.state {
        case .connecting: wantsWrite = true
        case .sending: wantsWrite = true
        default: wantsWrite = transport.waitsForWritable
        }
        self.loop.setWritableInterest(fd: transport.fd, token: self.token, wantsWrite)
    }

    private func closeSocket() {
        guard let transport = self.transport else { return }
        self.transport = nil
        if self.isRegistered {
            self.loop.deregister(fd: transport.fd, token: self.token)
            self.isRegistered = false
        }
        transport.close()
    }

    // MARK: - EventHandler

    func handleEvents(_ events: UInt32) {
        self.loop.assertInLoop()
        guard let transport = self.transport else { return }
        switch self.machine.state {
        case .connecting:
            let err = SystemCalls.socketError(transport.fd)
            if err == 0 && events & (EventLoop.writable | EventLoop.readable) == 0 && events & EventLoop.error == 0 {
                return
            }
            self.run(self.machine.connected(errno: err))
            if err != 0 { self.address = nil }
        case .sending(let sent):
            self.write(from: sent)
            if case .sending = self.machine.state, events & EventLoop.readable != 0 { self.readAll() }
        case .receiving, .ready:
            self.readAll()
        case .idle, .resolving, .closed:
            break
        }
    }

    func handleDeadline() {}

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
