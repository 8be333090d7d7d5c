import Dispatch
package import GateContract
package import GatewayIO
import Glibc
package import PolicyModel
import Synchronization

/// The proxy: listeners, event loops, upstream pools, access log and metrics.
///
/// Each listener has its own `RequestGate` (the main listeners an enforcing gate, the
/// admin listener one that answers locally). The gates, the upstream table, the limits and
/// the header lists form one `ServingSnapshot` that `install` swaps at once (start, SIGHUP
/// reload); a request uses the snapshot that was current when its head arrived.
///
/// Threading: public methods may be called from any queue except a loop's own queue
/// (shutdown waits); connection state lives on the loops.
package final class GatewayServer: Sendable {
    package let group: EventLoopGroup
    package let metrics: ProxyMetrics
    package let accessLog: AccessLog?
    let loopContexts: [LoopContext]
    let activeConnections = AtomicCounter()
    /// Request bodies buffered for the gates, over every connection (`limits.maxBufferedBodyBytes`).
    package let bodyBudget: BufferedBodyBudget
    /// Buffered body bytes per client address (`limits.max_buffered_body_bytes_per_address`).
    package let addressBodyBytes = AddressLedger()
    /// Open connections per peer address (`limits.max_connections_per_address`).
    package let addressConnections = AddressLedger()
    private let state: Mutex<ServerState>
    /// What connections read from the policy: replaced whole by `install`.
    let serving: ServingSnapshotCell
    private let isDrainingFlag = Atomic<Bool>(false)
    private let shutdownState = Mutex<ShutdownState>(.running)

    enum ShutdownState {
        case running
        /// Connections are finishing; `waiters` hear the outcome.
        case draining(waiters: [@Sendable (Bool) -> Void])
        /// The last connection closed or the deadline passed: loops and pools are closing.
        case closing(waiters: [@Sendable (Bool) -> Void])
        case finished(drained: Bool)
    }

    struct ServerState {
        var listeners: [Listener] = []
        var contexts: [String: ListenerContext] = [:]
    }

    /// - Parameters:
    ///   - loopCount: serial queues, each with its own epoll fd (default: one per core).
    ///   - accessLog: nil disables the access log.
    package init(
        limits: GatewayLimits = GatewayLimits(),
        loopCount: Int = GatewayServer.defaultLoopCount,
        metrics: MetricsRegistry = MetricsRegistry(),
        accessLog: AccessLog? = AccessLog()
    ) throws(IOError) {
        _ = SystemCalls.ignoreSIGPIPE
        self.group = try EventLoopGroup(count: loopCount)
        self.metrics = ProxyMetrics(registry: metrics)
        self.bodyBudget = BufferedBodyBudget(limit: limits.maxBufferedBodyBytes, gauge: self.metrics.bufferedBodyBytes)
        self.accessLog = accessLog
        if let accessLog { accessLog.exportDroppedLines(through: metrics) }
        self.state = Mutex(ServerState())
        self.serving = ServingSnapshotCell(ServingSnapshot(limits: limits))
        var contexts: [LoopContext] = []
        for loop in self.group.loops {
            contexts.append(LoopContext(loop: loop, metrics: self.metrics, accessLog: accessLog))
        }
        self.loopContexts = contexts
        for context in contexts {
            context.loop.execute { context.installBatchHook() }
        }
    }

    package static var defaultLoopCount: Int {
        max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }

    package var isDraining: Bool { self.isDrainingFlag.load(ordering: .relaxed) }

    package var openConnections: Int { Int(self.activeConnections.load()) }

    /// Start and reload: resolves the upstreams (names, `https://` contexts: call off the
    /// loops), then swaps the whole snapshot at once. Gates are replaced for the listener names
    /// `configuration` gives; a listener it does not name keeps its gate. Targets whose
    /// configuration is unchanged keep their warm pools. Throws `IOError` (a name does not
    /// resolve) or `TLSConfigurationError` (an upstream's CA file or client certificate);
    /// either leaves everything running as it was.
    package func install(_ configuration: ServingConfiguration) throws {
        let (table, retired) = try UpstreamTable.make(
            upstreams: configuration.upstreams, loops: self.group.loops, previous: self.serving.current.upstreams,
            metrics: self.metrics, bufferSweeps: self.loopContexts.map(\.tlsBufferSweep))
        self.serving.swap { snapshot in
            snapshot.gates.merge(configuration.gates) { _, new in new }
            snapshot.upstreams = table
            snapshot.limits = configuration.limits
            snapshot.trustedProxies = configuration.trustedProxies
            snapshot.clientSubjectHeaders = configuration.clientSubjectHeaders
            snapshot.clientTrustHeaders = configuration.clientTrustHeaders
            snapshot.accessLogKeyID = configuration.accessLogKeyID
            snapshot.websocketRoutes = configuration.websocketRoutes
            snapshot.tunnels = configuration.tunnels
            snapshot.http2 = configuration.http2
        }
        self.bodyBudget.setLimit(configuration.limits.maxBufferedBodyBytes)
        for target in retired { target.retire() }
    }

    /// Replaces the upstream table and, when given, the limits (tests and benchmarks that
    /// build a server without a policy); the rest of the snapshot stays.
    package func update(upstreams: [String: UpstreamConfiguration], limits: GatewayLimits? = nil) throws {
        let current = self.serving.current
        var configuration = ServingConfiguration(snapshot: current)
        configuration.upstreams = upstreams
        if let limits { configuration.limits = limits }
        configuration.gates = [:]
        try self.install(configuration)
    }

    /// The running upstream table (what `install` last put in the snapshot).
    package var upstreamTable: UpstreamTable { self.serving.current.upstreams }

    /// Changes one part of the snapshot other than the upstreams (tests, and a listener's gate).
    package func update(_ change: (inout ServingSnapshot) -> Void) {
        self.serving.swap(change)
    }

    /// Starts listening on `address` with `gate`. Several addresses may share a name (and so a
    /// gate). Returns the bound address (the real port when `address.port` is 0).
    /// `proxyProtocol`: every connection must start with a PROXY protocol header
    /// (`ProxyHeaderReader`), read before the TLS handshake and HTTP.
    @discardableResult
    package func listen(
        on address: ListenAddress, name: String, gate: any RequestGate, tls: ListenerTLS? = nil,
        proxyProtocol: Bool = false, checkOnly: Bool = false, h2c: Bool = false
    ) throws(IOError) -> SocketAddress {
        let socketAddress = try SocketAddress.resolve(host: address.host, port: address.port)
        let fd = try SystemCalls.listen(on: socketAddress)
        let bound = SystemCalls.localAddress(fd) ?? socketAddress
        let (context, loopIndex) = self.state.withLock { state -> (ListenerContext, Int) in
            let context: ListenerContext
            if let existing = state.contexts[name] {
                context = existing
            } else {
                self.serving.swap { snapshot in
                    if snapshot.gates[name] == nil { snapshot.gates[name] = gate }
                }
                context = ListenerContext(name: name, checkOnly: checkOnly, cell: self.serving, initialGate: gate)
                state.contexts[name] = context
            }
            return (context, state.listeners.count % self.group.loops.count)
        }
        let listener = Listener(
            fd: fd, address: bound, server: self, context: context, loop: self.group.loops[loopIndex], tls: tls,
            proxyProtocol: proxyProtocol, h2c: h2c)
        self.state.withLock { $0.listeners.append(listener) }
        listener.loop.execute { listener.start() }
        return bound
    }

    /// Where a new connection accepted on `loop` goes: round-robin over the loops.
    func adopt(
        fd: Int32, peer: SocketAddress, context: ListenerContext, tls: ListenerTLS?, proxyProtocol: Bool = false,
        h2c: Bool = false, acceptedOn loop: EventLoop
    ) {
        let limits = context.limitsSnapshot
        let open = self.activeConnections.increment()
        if open >= UInt64(limits.maxConnections) || self.isDraining {
            self.metrics.rejectedConnections.increment()
            SystemCalls.close(fd)
            // The count this accept held for a moment may have been the drain's last one.
            if self.activeConnections.decrement() == 0 && self.isDraining { self.endDrain() }
            return
        }
        // Every connection is counted per address, so a cap set by a reload applies at once.
        let peerText = peer.ipText
        let peerKey = IPAddressBytes.limitKey(peerText)
        guard self.addressConnections.tryAdd(peerKey, 1, limit: Self.perAddressCap(limits)) else {
            self.activeConnections.decrement()
            self.refuseOverAddressCap(fd: fd, limits: limits)
            return
        }
        self.metrics.activeConnections.add(1)
        let target = self.group.next()
        let loopContext = self.loopContexts[target.index]
        let start: @Sendable () -> Void = {
            guard proxyProtocol else {
                self.startConnection(
                    fd: fd, clientAddress: peerText, limitKey: peerKey, context: context, loopContext: loopContext,
                    tls: tls, h2c: h2c)
                return
            }
            // The PROXY header comes first, even before a TLS ClientHello.
            let snapshot = context.snapshot
            ProxyHeaderReader.start(
                fd: fd, socketPeer: peerText, trustedProxies: snapshot.trustedProxies,
                timeout: snapshot.limits.headerReadTimeout.nanoseconds, loopContext: loopContext, server: self,
                onHeader: { clientAddress in
                    self.proxiedConnection(
                        fd: fd, socketPeerKey: peerKey, clientAddress: clientAddress ?? peerText, context: context,
                        loopContext: loopContext, tls: tls, h2c: h2c)
                },
                onRefused: { self.connectionClosed(peerLimitKey: peerKey) })
        }
        if target === loop { start() } else { target.execute(start) }
    }

    private static func perAddressCap(_ limits: GatewayLimits) -> Int {
        limits.maxConnectionsPerAddress > 0 ? limits.maxConnectionsPerAddress : Int.max
    }

    /// Over `limits.max_connections_per_address`: counted, logged (throttled), told, closed.
    /// The caller has given back the connection's slot in `activeConnections`.
    private func refuseOverAddressCap(fd: Int32, limits: GatewayLimits) {
        self.metrics.limitRefusals.labels("connections_per_address").increment()
        if let suppressed = self.connectionCapLog.admit() {
            Log.warning(
                "rate_limited",
                [
                    ("limit", "connections_per_address"),
                    ("max_connections_per_address", String(limits.maxConnectionsPerAddress)),
                    ("suppressed", String(suppressed)),
                ])
        }
        // Best effort, on a fresh socket whose send buffer is empty: the client learns why.
        Self.connectionCapResponse.withUnsafeBytes { SystemCalls.writeOnce(fd, $0) }
        SystemCalls.close(fd)
    }

    /// The PROXY header named the client: the connection now counts against the client's
    /// address, not the load balancer's (`max_connections_per_address` is per client).
    private func proxiedConnection(
        fd: Int32, socketPeerKey: String, clientAddress: String, context: ListenerContext, loopContext: LoopContext,
        tls: ListenerTLS?, h2c: Bool
    ) {
        let clientKey = IPAddressBytes.limitKey(clientAddress)
        if clientKey != socketPeerKey {
            let limits = context.limitsSnapshot
            self.addressConnections.remove(socketPeerKey, 1)
            guard self.addressConnections.tryAdd(clientKey, 1, limit: Self.perAddressCap(limits)) else {
                self.refuseOverAddressCap(fd: fd, limits: limits)
                _ = self.addressConnections.tryAdd(socketPeerKey, 1, limit: Int.max)
                self.connectionClosed(peerLimitKey: socketPeerKey)
                return
            }
        }
        self.startConnection(
            fd: fd, clientAddress: clientAddress, limitKey: clientKey, context: context, loopContext: loopContext,
            tls: tls, h2c: h2c)
    }

    /// On the connection's loop: its transport (a TLS session is set up there, its handshake
    /// runs there), then the `ProxyConnection`.
    private func startConnection(
        fd: Int32, clientAddress: String, limitKey: String, context: ListenerContext, loopContext: LoopContext,
        tls: ListenerTLS?, h2c: Bool
    ) {
        let transport: any ByteTransport
        if let tls {
            do {
                transport = try tls.transport(for: fd)
            } catch {
                SystemCalls.close(fd)
                self.metrics.tlsHandshakeFailures.labels("error").increment()
                self.connectionClosed(peerLimitKey: limitKey)
                return
            }
        } else {
            transport = PlainTransport(fd: fd)
        }
        ProxyConnection.start(
            transport: transport, clientAddress: clientAddress, context: context, loopContext: loopContext,
            tls: tls, server: self, acceptsPriorKnowledgeHTTP2: h2c && tls == nil)
    }

    func connectionClosed(peerLimitKey: String) {
        let remaining = self.activeConnections.decrement()
        self.metrics.activeConnections.add(-1)
        self.addressConnections.remove(peerLimitKey, 1)
        if remaining == 0 && self.isDraining { self.endDrain() }
    }

    private let connectionCapLog = LogThrottle(interval: .seconds(1))
    /// TLS handshake failures are logged at most once a second (scanners make many).
    let handshakeFailureLog = LogThrottle(interval: .seconds(1))
    /// Refused PROXY protocol headers are logged at most once a second.
    let proxyProtocolRefusalLog = LogThrottle(interval: .seconds(1))

    /// The 429 a connection over `limits.max_connections_per_address` gets before it is closed.
    static let connectionCapResponse: [UInt8] = {
        let body =
            #"{"error":"rate_limited","message":"too many open connections from this address (limits.max_connections_per_address)"}"#
        let head =
            "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            + "Connection: close\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
        return Array((head + body).utf8)
    }()

    /// SIGTERM: stop accepting, let in-flight requests finish (each with `Connection: close`),
    /// close idle keep-alive connections at once, and wait up to `drainTimeout` for the rest;
    /// then close what remains, the upstream pools and the loops. `completion(true)` when every
    /// connection finished in time.
    /// Calling it again while it runs (or after) only adds `completion`.
    package func shutdown(drainTimeout: Duration, completion: @escaping @Sendable (Bool) -> Void) {
        let startsNow = self.shutdownState.withLock { state -> Bool in
            switch state {
            case .running:
                state = .draining(waiters: [completion])
                return true
            case .draining(var waiters):
                waiters.append(completion)
                state = .draining(waiters: waiters)
                return false
            case .closing(var waiters):
                waiters.append(completion)
                state = .closing(waiters: waiters)
                return false
            case .finished(let drained):
                DispatchQueue.global().async { completion(drained) }
                return false
            }
        }
        guard startsNow else { return }
        self.isDrainingFlag.store(true, ordering: .relaxed)
        let listeners = self.state.withLock { state -> [Listener] in
            let listeners = state.listeners
            state.listeners.removeAll()
            return listeners
        }
        for listener in listeners {
            listener.loop.execute { listener.stop() }
        }
        for context in self.loopContexts {
            context.loop.execute { context.drainConnections() }
        }
        // Drained when the last connection closes (`connectionClosed`), or at the deadline.
        let deadline = DispatchTime.now() + .nanoseconds(Int(min(drainTimeout.nanoseconds, UInt64(Int.max))))
        DispatchQueue.global().asyncAfter(deadline: deadline) { self.endDrain() }
        if self.activeConnections.load() == 0 { self.endDrain() }
    }

    /// The drain ended (the last connection closed, or the deadline passed): once only, close
    /// what remains and tell the waiters whether every connection finished in time.
    private func endDrain() {
        let startsClosing = self.shutdownState.withLock { state -> Bool in
            guard case .draining(let waiters) = state else { return false }
            state = .closing(waiters: waiters)
            return true
        }
        guard startsClosing else { return }
        let drained = self.activeConnections.load() == 0
        self.finishShutdown(drained: drained) { drained in
            let waiters = self.shutdownState.withLock { state -> [@Sendable (Bool) -> Void] in
                defer { state = .finished(drained: drained) }
                if case .closing(let waiters) = state { return waiters }
                preconditionFailure("shutdown finished in state \(state)")
            }
            for waiter in waiters { waiter(drained) }
        }
    }

    private func finishShutdown(drained: Bool, completion: @escaping @Sendable (Bool) -> Void) {
        let group = DispatchGroup()
        for context in self.loopContexts {
            group.enter()
            context.loop.execute {
                context.closeEverything()
                group.leave()
            }
        }
        let upstreams = self.serving.current.upstreams
        group.notify(queue: .global()) {
            for target in upstreams.targets.values {
                for pool in target.pools {
                    group.enter()
                    pool.loop.execute {
                        pool.closeIdle()
                        group.leave()
                    }
                }
            }
            group.notify(queue: .global()) {
                self.accessLog?.flush()
                self.group.close { completion(drained) }
            }
        }
    }
}
