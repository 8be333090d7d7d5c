import GatewayIO

/// The HTTP/2 connections of one `h2`/`h2c` upstream on one loop: streams are multiplexed over
/// them, each carrying at most the upstream's `SETTINGS_MAX_CONCURRENT_STREAMS`. A request
/// takes a place on a connection with room; when every one is full, another is opened (up to
/// the loop's share of `max_connections`), else it waits in a bounded queue, served in order
/// as streams end.
///
/// Confined to `loop`; `@unchecked Sendable`: it only crosses queues to run on its own loop.
final class HTTP2UpstreamPool: @unchecked Sendable {
    enum RequestResult {
        /// The stream is open (`upstreamStreamOpened` was called).
        case started
        /// Waiting for a connection or a free stream.
        case queued
        /// The connect could not even start.
        case failed
        /// The waiting queue is full.
        case exhausted
    }

    private struct Waiter {
        let owner: any HTTP2UpstreamStreamOwner
        let fields: [(String, String)]
        let hasBody: Bool
    }

    let name: String
    let address: SocketAddress
    let loop: EventLoop
    let maxConnections: Int
    let maxWaiters: Int
    let connectTimeout: UInt64
    /// A connection without streams for this long closes (`upstreams.NAME.idle_timeout`).
    let idleTimeout: UInt64
    /// `upstreams.NAME.ping_interval` in nanoseconds; 0: no PING.
    let pingInterval: UInt64
    /// `h2` upstreams: TLS with ALPN `h2`; nil for `h2c`.
    let tls: UpstreamTLS?
    /// `:scheme` of the requests: `https` for `h2`, `http` for `h2c`.
    let scheme: String
    private let metrics: ProxyMetrics?
    /// This upstream's `HTTP2UpstreamMetrics` children (nil without metrics: tests).
    let counters: HTTP2UpstreamMetrics.Handles?
    private let failureLog = LogThrottle()
    private var connections: [HTTP2UpstreamConnection] = []
    private var waiters: [Waiter] = []
    private var dispatchScheduled = false
    private var isRetired = false

    init(
        name: String, address: SocketAddress, loop: EventLoop, maxConnections: Int, maxWaiters: Int,
        connectTimeout: UInt64, idleTimeout: UInt64 = 60_000_000_000, pingInterval: UInt64 = 0, tls: UpstreamTLS?,
        metrics: ProxyMetrics?
    ) {
        self.name = name
        self.address = address
        self.loop = loop
        self.maxConnections = maxConnections
        self.maxWaiters = maxWaiters
        self.connectTimeout = connectTimeout
        self.idleTimeout = idleTimeout
        self.pingInterval = pingInterval
        self.tls = tls
        self.scheme = tls == nil ? "http" : "https"
        self.metrics = metrics
        self.counters = metrics?.http2Upstreams.handles(upstream: name)
    }

    var connectionCount: Int { self.connections.count }
    var waiterCount: Int { self.waiters.count }

    /// Opens a stream for `owner` with `fields` now, or queues it.
    func request(
        _ fields: [(String, String)], hasBody: Bool, owner: any HTTP2UpstreamStreamOwner
    ) -> RequestResult {
        self.loop.assertInLoop()
        if self.waiters.isEmpty, let connection = self.connections.first(where: \.hasRoom),
            connection.start(fields, hasBody: hasBody, owner: owner)
        {
            return .started
        }
        if self.isRetired { return .failed }
        if self.waiters.count >= self.maxWaiters { return .exhausted }
        self.waiters.append(Waiter(owner: owner, fields: fields, hasBody: hasBody))
        if self.needsAnotherConnection {
            do {
                self.opened(try HTTP2UpstreamConnection.connect(pool: self))
            } catch {
                self.waiters.removeLast()
                return .failed
            }
        }
        return .queued
    }

    /// The owner no longer waits (its client went away, a deadline passed).
    func cancelWait(_ owner: any HTTP2UpstreamStreamOwner) {
        self.waiters.removeAll { $0.owner === owner }
    }

    /// Every connection is full or going away, none is still connecting, and the loop's share
    /// of `max_connections` is not used up.
    private var needsAnotherConnection: Bool {
        guard !self.isRetired, self.connections.count < self.maxConnections else { return false }
        return !self.connections.contains { !$0.isClosed && !$0.goingAway && (!$0.isOpen || !$0.settingsReceived) }
            && !self.connections.contains(where: \.hasRoom)
    }

    /// A stream ended, a SETTINGS or GOAWAY arrived: waiters are served on the loop's next turn
    /// (never inside the session's callbacks).
    func roomFreed() {
        guard !self.waiters.isEmpty, !self.dispatchScheduled else { return }
        self.dispatchScheduled = true
        self.loop.execute { [self] in
            self.dispatchScheduled = false
            self.dispatch()
        }
    }

    private func dispatch() {
        while !self.waiters.isEmpty {
            guard let connection = self.connections.first(where: \.hasRoom) else {
                if self.needsAnotherConnection {
                    do {
                        self.opened(try HTTP2UpstreamConnection.connect(pool: self))
                    } catch {
                        self.failWaiters(.unavailable)
                    }
                }
                return
            }
            let waiter = self.waiters.removeFirst()
            if !connection.start(waiter.fields, hasBody: waiter.hasBody, owner: waiter.owner) {
                waiter.owner.upstreamStreamFailed(.unavailable)
            }
        }
    }

    private func failWaiters(_ failure: ProxyConnectionStateMachine.UpstreamFailure) {
        let waiters = self.waiters
        self.waiters.removeAll()
        for waiter in waiters { waiter.owner.upstreamStreamFailed(failure) }
    }

    private func opened(_ connection: HTTP2UpstreamConnection) {
        self.connections.append(connection)
        self.counters?.connections.add(1)
    }

    /// Takes `connection` out of the pool (once: it is counted out of the open gauge then).
    private func remove(_ connection: HTTP2UpstreamConnection) {
        let count = self.connections.count
        self.connections.removeAll { $0 === connection }
        if self.connections.count < count { self.counters?.connections.add(-1) }
    }

    func connectionClosed(_ connection: HTTP2UpstreamConnection) {
        self.remove(connection)
        self.roomFreed()
    }

    /// A stream the upstream did not process is sent again (`upstreamStreamBroke(unprocessed:)`).
    func countRetry() {
        self.counters?.retries.increment()
    }

    /// A connection could not be opened: the waiters it was opened for fail with its reason,
    /// unless another connection can still take them.
    func connectFailed(_ connection: HTTP2UpstreamConnection, _ failure: ProxyConnectionStateMachine.UpstreamFailure) {
        self.remove(connection)
        self.counters?.closes[.error]?.increment()
        if self.connections.contains(where: { !$0.isClosed && !$0.goingAway }) {
            self.roomFreed()
        } else {
            self.failWaiters(failure)
        }
    }

    // MARK: - TLS events

    func tlsHandshakeCompleted(resumed: Bool) {
        self.metrics?.upstreamTLSHandshakes.labels(self.name, resumed ? "true" : "false").increment()
    }

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

    /// Reload removed or changed the upstream (or shutdown): connections drain and close.
    func retire() {
        self.loop.assertInLoop()
        self.isRetired = true
        for connection in self.connections { connection.drain() }
        self.failWaiters(.unavailable)
    }
}
