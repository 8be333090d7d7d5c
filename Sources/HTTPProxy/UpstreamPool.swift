package import GatewayIO
import Glibc
import HTTP1
package import PolicyModel

/// Opens the transport of a new upstream connection instead of a TCP connect to the address,
/// already connected: GatewayTesting's in-memory upstream. Plain HTTP upstreams only.
package typealias UpstreamTransportFactory = @Sendable (SocketAddress) throws(IOError) -> any ByteTransport

/// One configured upstream: its resolved address and one keep-alive pool per event loop.
///
/// Pools are per loop (as nginx keeps one per worker), so a connection and its upstream
/// connection always share one queue and no lock is needed. `max_connections` is split
/// over the loops (each at least 1). `pools[i]` is confined to loop `i`'s queue.
package final class UpstreamTarget: @unchecked Sendable {
    package let configuration: UpstreamConfiguration
    package let address: SocketAddress
    /// `https://` upstreams: the client context (swapped by reloads), server name and port.
    package let tls: UpstreamTLS?
    /// `host:port` for the Host header of HTTP/1.0 requests that carried none.
    package let hostHeader: String
    /// `address` as `ip:port` (`[ip]:port` for IPv6), computed once: the access log's `upstream_addr`.
    package let addressText: String
    let pools: [UpstreamPool]
    /// `protocol: h2`/`h2c` upstreams: one HTTP/2 pool per loop (HTTP/2 clients' streams go
    /// there); empty for `http1`.
    let http2Pools: [HTTP2UpstreamPool]
    /// The configuration's timeouts in nanoseconds (read per request).
    let connectTimeoutNanoseconds: UInt64
    let responseTimeoutNanoseconds: UInt64

    /// `bufferSweeps`: one per loop (`loops[i]`'s), for `https://` upstreams whose context keeps
    /// record buffers between records; nil when the context releases them after each.
    /// `transportFactory`: tests only (nil: sockets).
    package init(
        configuration: UpstreamConfiguration, address: SocketAddress, loops: [EventLoop], maxWaitersPerLoop: Int = 1024,
        tls: UpstreamTLS? = nil, metrics: ProxyMetrics? = nil, bufferSweeps: [TLSIdleBufferSweep]? = nil,
        transportFactory: UpstreamTransportFactory? = nil
    ) {
        precondition(transportFactory == nil || tls == nil, "a transport factory serves plain HTTP upstreams only")
        self.configuration = configuration
        self.address = address
        self.addressText = address.description
        self.tls = tls
        self.hostHeader =
            configuration.host.contains(":")
            ? "[\(configuration.host)]:\(configuration.port)" : "\(configuration.host):\(configuration.port)"
        self.connectTimeoutNanoseconds = configuration.connectTimeout.nanoseconds
        self.responseTimeoutNanoseconds = configuration.responseTimeout.nanoseconds
        let perLoop = max(1, (configuration.maxConnections + loops.count - 1) / max(loops.count, 1))
        precondition(bufferSweeps == nil || bufferSweeps?.count == loops.count, "one buffer sweep per loop")
        let http2Pools: [HTTP2UpstreamPool]
        if configuration.wireProtocol == .http1 || transportFactory != nil {
            http2Pools = []
        } else {
            http2Pools = loops.indices.map { index in
                HTTP2UpstreamPool(
                    name: configuration.name, address: address, loop: loops[index], maxConnections: perLoop,
                    maxWaiters: maxWaitersPerLoop, connectTimeout: configuration.connectTimeout.nanoseconds,
                    idleTimeout: configuration.idleTimeout.nanoseconds,
                    pingInterval: configuration.pingInterval?.nanoseconds ?? 0, tls: tls, metrics: metrics)
            }
        }
        self.http2Pools = http2Pools
        self.pools = loops.indices.map { index in
            // An HTTP/2 upstream's HTTP/1.1 pool (HTTP/1.1 clients): each connection is a local
            // socket pair to an `HTTP1ToHTTP2UpstreamExchange`, whose streams go to the loop's
            // HTTP/2 pool. The lease per request and the HTTP/1.1 framing stay the proxy's.
            var factory = transportFactory
            if !http2Pools.isEmpty {
                let http2Pool = http2Pools[index]
                factory = { _ throws(IOError) in try HTTP1ToHTTP2UpstreamExchange.open(pool: http2Pool) }
            }
            return UpstreamPool(
                name: configuration.name, address: address, loop: loops[index],
                maxConnections: http2Pools.isEmpty ? perLoop : min(perLoop * 100, 4096),
                maxWaiters: maxWaitersPerLoop, connectTimeout: configuration.connectTimeout.nanoseconds,
                tls: http2Pools.isEmpty ? tls : nil, metrics: metrics, bufferSweep: bufferSweeps?[index],
                transportFactory: factory)
        }
    }

    /// Closes every idle connection and refuses new leases (after a reload removed or changed it).
    package func retire() {
        for pool in self.pools {
            pool.loop.execute { pool.retire() }
        }
        for pool in self.http2Pools {
            pool.loop.execute { pool.retire() }
        }
    }
}

/// The upstreams of one policy, by name. Immutable.
package final class UpstreamTable: Sendable {
    package let targets: [String: UpstreamTarget]

    package init(targets: [String: UpstreamTarget]) {
        self.targets = targets
    }

    /// The configurations the table was built from, by name.
    package var configurations: [String: UpstreamConfiguration] { self.targets.mapValues(\.configuration) }

    /// Builds the table for `upstreams`, reusing the targets of `previous` whose configuration
    /// did not change (their warm pools stay). Resolves names and reads the TLS files of every
    /// `https://` upstream (a reload picks up a renewed CA or client certificate, also for a
    /// reused target): call off the connection queues. Everything that can fail happens before
    /// anything changes, so a bad file or name leaves the running table and contexts alone.
    ///
    /// - Throws: `IOError` (a name does not resolve) or `TLSConfigurationError` (a CA file or
    ///   client certificate cannot be used).
    ///
    /// `bufferSweeps`: the loops' sweeps (one per loop, in `loops`' order). With them, `https://`
    /// upstreams keep their record buffers between requests and give them back once a pooled
    /// connection went a tick unused; without, OpenSSL releases them after every record.
    package static func make(
        upstreams: [String: UpstreamConfiguration], loops: [EventLoop], previous: UpstreamTable?,
        metrics: ProxyMetrics? = nil, bufferSweeps: [TLSIdleBufferSweep]? = nil
    ) throws -> (table: UpstreamTable, retired: [UpstreamTarget]) {
        var contexts: [String: TLSClientContext] = [:]
        for (name, configuration) in upstreams.sorted(by: { $0.key < $1.key }) {
            guard let tls = configuration.tls else { continue }
            var settings = TLSClientSettings(upstream: tls)
            settings.offersHTTP2 = configuration.wireProtocol == .h2
            let context = try TLSClientContext(
                settings: settings, releasesBuffersAfterEachRecord: bufferSweeps == nil)
            for warning in context.warnings {
                Log.warning("tls_certificate_warning", [("upstream", name), ("warning", String(describing: warning))])
            }
            contexts[name] = context
        }
        var addresses: [String: SocketAddress] = [:]
        for (name, configuration) in upstreams {
            if let old = previous?.targets[name], old.configuration == configuration { continue }
            addresses[name] = try SocketAddress.resolve(host: configuration.host, port: configuration.port)
        }
        var targets: [String: UpstreamTarget] = [:]
        for (name, configuration) in upstreams {
            if let old = previous?.targets[name], old.configuration == configuration {
                if let context = contexts[name] { old.tls?.replace(context) }
                targets[name] = old
                continue
            }
            guard let address = addresses[name] else { preconditionFailure("upstream \(name) was not resolved") }
            let tls = configuration.tls.flatMap { tls in
                contexts[name].map {
                    UpstreamTLS(context: $0, serverName: tls.serverName, port: Int(configuration.port))
                }
            }
            targets[name] = UpstreamTarget(
                configuration: configuration, address: address, loops: loops, tls: tls, metrics: metrics,
                bufferSweeps: bufferSweeps)
        }
        var retired: [UpstreamTarget] = []
        for (name, old) in previous?.targets ?? [:] where targets[name] !== old {
            retired.append(old)
        }
        return (UpstreamTable(targets: targets), retired)
    }
}

/// The keep-alive connections of one upstream on one loop. Confined to `loop`
/// (hence `@unchecked Sendable`: it only crosses queues to be run on its own loop).
/// `@exclusivity(unchecked)` properties: see `ProxyConnection`.
final class UpstreamPool: @unchecked Sendable {
    enum AcquireResult {
        /// Connected and leased now.
        case ready(UpstreamConnection)
        /// A connection is being opened for the lessee: `upstreamReady`/`upstreamFailed` follows.
        case connecting
        /// All connections are busy: the lessee waits its turn.
        case queued
        /// The connect could not even start.
        case failed(IOError)
        /// The waiting queue is full.
        case exhausted
    }

    let name: String
    let address: SocketAddress
    let loop: EventLoop
    let maxConnections: Int
    let maxWaiters: Int
    let connectTimeout: UInt64
    /// `https://` upstreams: new connections shake hands with it before they are leased.
    let tls: UpstreamTLS?
    /// This loop's sweep of idle TLS record buffers, when the context keeps them (`UpstreamTable.make`).
    let bufferSweep: TLSIdleBufferSweep?
    /// Where new connections' transports come from instead of sockets: tests, and the socket
    /// pairs to `HTTP1ToHTTP2UpstreamExchange` of a `protocol: h2`/`h2c` upstream.
    let transportFactory: UpstreamTransportFactory?
    private let handshakeCounters: (full: Counter, resumed: Counter)?
    private let metrics: ProxyMetrics?
    /// One `upstream_tls_failed` line per second per pool: a broken certificate fails every
    /// request, and the counter has the totals.
    private let failureLog = LogThrottle()
    @exclusivity(unchecked) private var idle: [UpstreamConnection] = []
    /// Connecting + idle + leased.
    @exclusivity(unchecked) private(set) var openCount = 0
    @exclusivity(unchecked) private var waiters = FIFOQueue<any UpstreamLessee>()
    @exclusivity(unchecked) private var isRetired = false

    init(
        name: String, address: SocketAddress, loop: EventLoop, maxConnections: Int, maxWaiters: Int,
        connectTimeout: UInt64, tls: UpstreamTLS? = nil, metrics: ProxyMetrics? = nil,
        bufferSweep: TLSIdleBufferSweep? = nil, transportFactory: UpstreamTransportFactory? = nil
    ) {
        self.bufferSweep = bufferSweep
        self.transportFactory = transportFactory
        self.name = name
        self.address = address
        self.loop = loop
        self.maxConnections = maxConnections
        self.maxWaiters = maxWaiters
        self.connectTimeout = connectTimeout
        self.tls = tls
        self.metrics = metrics
        if tls != nil, let metrics {
            self.handshakeCounters = (
                metrics.upstreamTLSHandshakes.labels(name, "false"), metrics.upstreamTLSHandshakes.labels(name, "true")
            )
        } else {
            self.handshakeCounters = nil
        }
    }

    // MARK: - TLS events (counted and logged here, once per connection, not per lessee)

    /// A new connection finished its handshake (`resumed`: an earlier session was reused).
    func tlsHandshakeCompleted(resumed: Bool) {
        guard let counters = self.handshakeCounters else { return }
        (resumed ? counters.resumed : counters.full).increment()
    }

    /// A new connection's handshake failed (`timeout` when the connect deadline passed first).
    func tlsHandshakeFailed(reason: String, error: String) {
        self.metrics?.upstreamTLSFailures.labels(self.name, reason).increment()
        guard let suppressed = self.failureLog.admit() else { return }
        Log.warning(
            "upstream_tls_failed",
            [
                ("upstream", self.name), ("server_name", self.tls?.serverName ?? "-"),
                ("address", self.address.description), ("reason", reason), ("error", error),
                ("suppressed", String(suppressed)),
            ])
    }

    var idleCount: Int { self.idle.count }
    var waiterCount: Int { self.waiters.count }

    /// A connection for `lessee`: an idle pooled one (most recently used first), a new one,
    /// or a place in the queue. `fresh` skips idle connections (the retry after a stale one).
    func acquire(for lessee: any UpstreamLessee, fresh: Bool = false) -> AcquireResult {
        self.loop.assertInLoop()
        if !fresh, let connection = self.idle.popLast() {
            connection.lease(to: lessee, reused: true)
            return .ready(connection)
        }
        if fresh, let extra = self.idle.first, self.openCount >= self.maxConnections {
            // Make room for the fresh connection: an idle one goes.
            self.idle.removeFirst()
            self.close(extra)
        }
        if self.openCount < self.maxConnections && !self.isRetired {
            return self.open(for: lessee)
        }
        if self.waiterCount >= self.maxWaiters { return .exhausted }
        self.waiters.append(lessee)
        return .queued
    }

    private func open(for lessee: any UpstreamLessee) -> AcquireResult {
        do {
            let connection = try UpstreamConnection.connect(to: self.address, pool: self, lessee: lessee)
            self.openCount += 1
            if connection.state == .leased { return .ready(connection) }
            return .connecting
        } catch {
            return .failed(error)
        }
    }

    /// The lessee no longer waits (its client went away).
    func cancelWait(_ lessee: any UpstreamLessee) {
        self.loop.assertInLoop()
        self.waiters.removeFirst(where: { $0 === lessee })
    }

    private func popWaiter() -> (any UpstreamLessee)? {
        self.waiters.removeFirst()
    }

    /// The lessee is done with `connection`: keep it for reuse or close it.
    func release(_ connection: UpstreamConnection, reusable: Bool) {
        self.loop.assertInLoop()
        if reusable && !self.isRetired && connection.isCleanForReuse {
            connection.becomeIdle()
            if let waiter = self.popWaiter() {
                self.handOver(connection, to: waiter)
            } else {
                self.idle.append(connection)
            }
        } else {
            self.close(connection)
        }
    }

    /// `connection` (leased) carries a tunnel from now on: it leaves the pool's count, so an
    /// upstream's `max_connections` bounds its HTTP connections and not the tunnels (those count
    /// against the client connection caps); a waiter gets the freed place. The lessee closes it
    /// (`UpstreamConnection.closeDetached`); it never comes back.
    func detach(_ connection: UpstreamConnection) {
        self.loop.assertInLoop()
        precondition(connection.state == .leased, "only a leased connection carries a tunnel")
        connection.detach()
        self.openCount -= 1
        self.openForWaiterIfRoom()
    }

    /// An idle connection's socket showed activity (the upstream closed it, or sent junk).
    func idleConnectionDied(_ connection: UpstreamConnection) {
        if let index = self.idle.firstIndex(where: { $0 === connection }) {
            self.idle.remove(at: index)
        }
        self.close(connection)
    }

    /// Closes `connection` (leased, idle or connecting); a waiter, if any, gets a new one.
    func close(_ connection: UpstreamConnection) {
        guard connection.state != .closed else { return }
        if connection.isDetached {
            connection.closeDetached()
            return
        }
        connection.closeSocket()
        self.openCount -= 1
        self.openForWaiterIfRoom()
    }

    /// A place was freed: the longest waiter, if any, gets a new connection.
    private func openForWaiterIfRoom() {
        guard !self.isRetired, self.openCount < self.maxConnections, let waiter = self.popWaiter() else { return }
        // Deferred: the caller may be in the middle of reading into the loop's scratch buffer.
        self.loop.execute { [self] in
            switch self.open(for: waiter) {
            case .ready(let ready): waiter.upstreamReady(ready)
            case .connecting, .queued: break
            case .failed: waiter.upstreamFailed(.unavailable)
            case .exhausted: waiter.upstreamFailed(.poolExhausted)
            }
        }
    }

    private func handOver(_ connection: UpstreamConnection, to waiter: any UpstreamLessee) {
        connection.lease(to: waiter, reused: true)
        // Deferred for the same reason as in `close`.
        self.loop.execute { waiter.upstreamReady(connection) }
    }

    /// Reload removed or changed this upstream: idle connections close now, leased ones on release.
    func retire() {
        self.loop.assertInLoop()
        self.isRetired = true
        let idle = self.idle
        self.idle.removeAll()
        for connection in idle { self.close(connection) }
    }

    /// Shutdown: close every idle connection.
    func closeIdle() {
        self.loop.assertInLoop()
        let idle = self.idle
        self.idle.removeAll()
        for connection in idle { self.close(connection) }
    }
}
