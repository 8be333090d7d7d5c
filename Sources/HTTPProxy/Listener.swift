import GatewayIO

/// A listening socket, registered (edge-triggered) on one loop; accepted connections are
/// spread round-robin over all loops. Confined to `loop`.
final class Listener: EventHandler, @unchecked Sendable {
    let fd: Int32
    let address: SocketAddress
    unowned let server: GatewayServer
    let context: ListenerContext
    let loop: EventLoop
    /// TLS ends here when set; plain HTTP otherwise.
    let tls: ListenerTLS?
    /// Every connection starts with a PROXY protocol header (`proxy_protocol: true`).
    let proxyProtocol: Bool
    /// Plain listener with `h2c: true`: clients may start with the HTTP/2 preface.
    let h2c: Bool
    private var token: UInt64 = 0
    private var isOpen = false

    init(
        fd: Int32, address: SocketAddress, server: GatewayServer, context: ListenerContext, loop: EventLoop,
        tls: ListenerTLS?, proxyProtocol: Bool = false, h2c: Bool = false
    ) {
        self.h2c = h2c
        self.tls = tls
        self.proxyProtocol = proxyProtocol
        self.fd = fd
        self.address = address
        self.server = server
        self.context = context
        self.loop = loop
    }

    func start() {
        self.loop.assertInLoop()
        do {
            self.token = try self.loop.register(fd: self.fd, handler: self)
            self.isOpen = true
            self.acceptAll()
        } catch {
            Log.error("listener_failed", [("address", self.address.description), ("error", error.description)])
            SystemCalls.close(self.fd)
        }
    }

    func stop() {
        self.loop.assertInLoop()
        guard self.isOpen else { return }
        self.isOpen = false
        self.loop.deregister(fd: self.fd, token: self.token)
        SystemCalls.close(self.fd)
    }

    func handleEvents(_ events: UInt32) {
        self.loop.assertInLoop()
        self.acceptAll()
    }

    func handleDeadline() {
        self.loop.assertInLoop()
        // Retry after EMFILE/ENFILE.
        self.acceptAll()
    }

    private func acceptAll() {
        while self.isOpen {
            do {
                guard let (client, peer) = try SystemCalls.accept(self.fd) else { return }
                self.server.adopt(
                    fd: client, peer: peer, context: self.context, tls: self.tls, proxyProtocol: self.proxyProtocol,
                    h2c: self.h2c,
                    acceptedOn: self.loop)
            } catch {
                // EMFILE/ENFILE/ENOMEM: the pending connection stays queued; try again in a tick.
                Log.warning("accept_failed", [("address", self.address.description), ("error", error.description)])
                self.loop.setDeadline(token: self.token, after: 100_000_000)
                return
            }
        }
    }
}
