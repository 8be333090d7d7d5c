import GatewayIO
import Glibc
import PolicyModel

/// Executes `ProxyProtocolPreamble` for one accepted socket on a `proxy_protocol: true`
/// listener: registers the socket on its loop, peeks at what arrived on each readiness edge,
/// reads exactly the PROXY header off the socket, then deregisters and hands the socket on
/// (`onHeader`: TLS handshake or HTTP start there, with the bytes behind the header untouched).
/// A refused connection is counted (`attest_gateway_proxy_protocol_refusals_total{reason}`),
/// logged at most once a second, and closed.
///
/// Peeking on an edge-triggered socket is sound: bytes left in the socket do not raise new
/// edges, but every new segment does, and the peek always starts at the first byte.
///
/// Confined to `loop`.
final class ProxyHeaderReader: EventHandler {
    let fd: Int32
    /// The socket peer (the load balancer), as `SocketAddress.ipText`.
    let socketPeer: String
    private let loopContext: LoopContext
    private unowned let server: GatewayServer
    private var preamble = ProxyProtocolPreamble()
    private var token: UInt64 = 0
    private var isRegistered = false
    private var isFinished = false
    /// The header was read: `clientAddress` is its source (nil: the socket peer stands).
    private let onHeader: (_ clientAddress: String?) -> Void
    /// The connection was refused (already closed): give back its connection slot.
    private let onRefused: () -> Void

    private init(
        fd: Int32, socketPeer: String, loopContext: LoopContext, server: GatewayServer,
        onHeader: @escaping (String?) -> Void, onRefused: @escaping () -> Void
    ) {
        self.fd = fd
        self.socketPeer = socketPeer
        self.loopContext = loopContext
        self.server = server
        self.onHeader = onHeader
        self.onRefused = onRefused
    }

    /// Starts reading the header of `fd` on `loopContext`'s loop (call on that loop).
    /// `timeout`: nanoseconds from now until the whole header must be there.
    static func start(
        fd: Int32, socketPeer: String, trustedProxies: TrustedProxies, timeout: UInt64,
        loopContext: LoopContext, server: GatewayServer,
        onHeader: @escaping (String?) -> Void, onRefused: @escaping () -> Void
    ) {
        loopContext.loop.assertInLoop()
        let reader = ProxyHeaderReader(
            fd: fd, socketPeer: socketPeer, loopContext: loopContext, server: server, onHeader: onHeader,
            onRefused: onRefused)
        if case .refuse(let refusal) = reader.preamble.accepted(peer: socketPeer, trustedProxies: trustedProxies) {
            reader.refuse(refusal, registered: false)
            return
        }
        do {
            reader.token = try loopContext.loop.register(fd: fd, handler: reader)
            reader.isRegistered = true
        } catch {
            SystemCalls.close(fd)
            onRefused()
            return
        }
        loopContext.add(reader)
        loopContext.loop.setDeadline(token: reader.token, after: timeout)
        if server.isDraining {
            reader.forceClose()
            return
        }
        reader.readHeader()
    }

    func handleEvents(_ events: UInt32) {
        self.loopContext.loop.assertInLoop()
        self.readHeader()
    }

    func handleDeadline() {
        self.loopContext.loop.assertInLoop()
        self.execute(self.preamble.deadlinePassed())
    }

    /// Shutdown: a connection that has not even sent its PROXY header is idle; close it.
    func forceClose() {
        guard !self.isFinished else { return }
        self.isFinished = true
        self.deregister()
        SystemCalls.close(self.fd)
        self.onRefused()
    }

    private func readHeader() {
        guard !self.isFinished else { return }
        let limit = min(self.preamble.peekLimit, self.loopContext.loop.scratch.count)
        let scratch = self.loopContext.loop.scratch
        let result: IOResult
        do {
            result = try SystemCalls.peek(self.fd, into: scratch.baseAddress!, count: limit)
        } catch {
            self.execute(self.preamble.endOfFile())
            return
        }
        switch result {
        case .wouldBlock:
            return
        case .endOfFile:
            self.execute(self.preamble.endOfFile())
        case .processed(let count):
            let bytes = Array(UnsafeRawBufferPointer(rebasing: scratch[0..<count]))
            self.execute(self.preamble.peeked(bytes[...]))
        }
    }

    private func execute(_ action: ProxyProtocolPreamble.Action) {
        guard !self.isFinished else { return }
        switch action {
        case .waitForMore:
            return
        case .refuse(let refusal):
            self.refuse(refusal, registered: true)
        case .consume(let count, let clientAddress):
            // The header is in the socket already (the peek saw it): one read takes exactly it.
            let scratch = self.loopContext.loop.scratch
            let taken = try? SystemCalls.read(self.fd, into: scratch.baseAddress!, count: count)
            guard case .processed(count)? = taken else {
                self.refuse(.closedEarly, registered: true)
                return
            }
            self.isFinished = true
            self.deregister()
            self.onHeader(clientAddress)
        }
    }

    private func refuse(_ refusal: ProxyProtocolPreamble.Refusal, registered: Bool) {
        self.isFinished = true
        if registered { self.deregister() }
        SystemCalls.close(self.fd)
        self.server.metrics.proxyProtocolRefusals.labels(refusal.code).increment()
        if let suppressed = self.server.proxyProtocolRefusalLog.admit() {
            Log.info(
                "proxy_protocol_refused",
                [("peer", self.socketPeer), ("reason", refusal.code), ("suppressed", String(suppressed))])
        }
        self.onRefused()
    }

    private func deregister() {
        guard self.isRegistered else { return }
        self.isRegistered = false
        self.loopContext.loop.setDeadline(token: self.token, after: nil)
        self.loopContext.loop.deregister(fd: self.fd, token: self.token)
        self.loopContext.remove(self)
    }
}

@available(*, unavailable)
extension ProxyHeaderReader: Sendable {}
