import Glibc
import HTTP1

/// One configured upstream: its resolved address and one keep-alive pool per event loop.
///
/// Pools are per loop (as nginx keeps one per worker), so a connection and its upstream
/// connection always share one queue and no lock is needed. `max_connections` is split
/// over the loops (each at least 1). `pools[i]` is confined to loop `i`'s queue.
package final class UpstreamTarget: @unchecked Sendable {
    package let configuration: UpstreamConfiguration
    package let address: SocketAddress
    /// `host:port` for the Host header of HTTP/1.0 requests that carried none.
    package let hostHeader: String
    let pools: [UpstreamPool]
    /// The configuration's timeouts in nanoseconds (read per request).
    let connectTimeoutNanoseconds: UInt64
    let responseTimeoutNanoseconds: UInt64

    package init(
        configuration: UpstreamConfiguration, address: SocketAddress, loops: [EventLoop], maxWaitersPerLoop: Int = 1024
    ) {
        self.configuration = configuration
        self.address = address
        self.hostHeader =
            configuration.host.contains(":")
            ? "[\(configuration.host)]:\(configuration.port)" : "\(configuration.host):\(configuration.port)"
        self.connectTimeoutNanoseconds = configuration.connectTimeout.nanoseconds
        self.responseTimeoutNanoseconds = configuration.responseTimeout.nanoseconds
        let perLoop = max(1, (configuration.maxConnections + loops.count - 1) / max(loops.count, 1))
        self.pools = loops.map {
            UpstreamPool(
                name: configuration.name, address: address, loop: $0, maxConnections: perLoop,
                maxWaiters: maxWaitersPerLoop, connectTimeout: configuration.connectTimeout.nanoseconds)
        }
    }

    /// Closes every idle connection and refuses new leases (after a reload removed or changed it).
    package func retire() {
        for pool in self.pools {
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

    /// Builds the table for `upstreams`, reusing the targets of `previous` whose configuration
    /// did not change (their warm pools stay). Resolves names: call off the connection queues.
    package static func make(
        upstreams: [String: UpstreamConfiguration], loops: [EventLoop], previous: UpstreamTable?
    ) throws(IOError) -> (table: UpstreamTable, retired: [UpstreamTarget]) {
        var targets: [String: UpstreamTarget] = [:]
        for (name, configuration) in upstreams {
            if let old = previous?.targets[name], old.configuration == configuration {
                targets[name] = old
                continue
            }
            let address = try SocketAddress.resolve(host: configuration.host, port: configuration.port)
            targets[name] = UpstreamTarget(configuration: configuration, address: address, loops: loops)
        }
        var retired: [UpstreamTarget] = []
        for (name, old) in previous?.targets ?? [:] where targets[name] !== old {
            retired.append(old)
        }
        return (UpstreamTable(targets: targets), retired)
    }
}

/// Who waits for an upstream connection from a pool.
protocol UpstreamLessee: AnyObject, Sendable {
    /// A connection is connected and leased to the lessee (it sends its request now).
    func upstreamReady(_ connection: UpstreamConnection)
    /// Connecting failed, or the pool could not serve the lessee.
    func upstreamFailed(_ failure: ProxyConnectionStateMachine.UpstreamFailure, connection: UpstreamConnection?)
    /// Events on the leased connection's socket.
    func upstreamEvents(_ connection: UpstreamConnection, _ events: UInt32)
}

/// The keep-alive connections of one upstream on one loop. Confined to `loop.queue`
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
    @exclusivity(unchecked) private var idle: [UpstreamConnection] = []
    /// Connecting + idle + leased.
    @exclusivity(unchecked) private(set) var openCount = 0
    @exclusivity(unchecked) private var waiters: [any UpstreamLessee] = []
    @exclusivity(unchecked) private var waiterHead = 0
    @exclusivity(unchecked) private var isRetired = false

    init(
        name: String, address: SocketAddress, loop: EventLoop, maxConnections: Int, maxWaiters: Int,
        connectTimeout: UInt64
    ) {
        self.name = name
        self.address = address
        self.loop = loop
        self.maxConnections = maxConnections
        self.maxWaiters = maxWaiters
        self.connectTimeout = connectTimeout
    }

    var idleCount: Int { self.idle.count }
    var waiterCount: Int { self.waiters.count - self.waiterHead }

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
        guard let index = self.waiters[self.waiterHead...].firstIndex(where: { $0 === lessee }) else { return }
        self.waiters.remove(at: index)
    }

    private func popWaiter() -> (any UpstreamLessee)? {
        guard self.waiterHead < self.waiters.count else { return nil }
        let waiter = self.waiters[self.waiterHead]
        self.waiterHead += 1
        if self.waiterHead > 64 && self.waiterHead * 2 > self.waiters.count {
            self.waiters.removeFirst(self.waiterHead)
            self.waiterHead = 0
        }
        return waiter
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
        connection.closeSocket()
        self.openCount -= 1
        if !self.isRetired, self.openCount < self.maxConnections, let waiter = self.popWaiter() {
            // Deferred: the caller may be in the middle of reading into the loop's scratch buffer.
            self.loop.execute { [self] in
                switch self.open(for: waiter) {
                case .ready(let ready): waiter.upstreamReady(ready)
                case .connecting, .queued: break
                case .failed: waiter.upstreamFailed(.unavailable, connection: nil)
                case .exhausted: waiter.upstreamFailed(.poolExhausted, connection: nil)
                }
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
        self.isRetired = true
        let idle = self.idle
        self.idle.removeAll()
        for connection in idle { self.close(connection) }
    }

    /// Shutdown: close every idle connection.
    func closeIdle() {
        let idle = self.idle
        self.idle.removeAll()
        for connection in idle { self.close(connection) }
    }
}

/// One TCP connection to an upstream. Confined to its pool's loop (`@unchecked Sendable` as the pool).
final class UpstreamConnection: EventHandler, @unchecked Sendable {
    enum State { case connecting, idle, leased, closed }

    let fd: Int32
    unowned let pool: UpstreamPool
    @exclusivity(unchecked) private(set) var token: UInt64 = 0
    @exclusivity(unchecked) private(set) var state: State = .connecting
    @exclusivity(unchecked) private(set) var lessee: (any UpstreamLessee)?
    /// Unsent request bytes.
    let output = IOBuffer(capacity: 4096)
    /// Response bytes not consumed by the parser yet.
    @exclusivity(unchecked) var input: IOBuffer?
    /// Edge-triggered: data may be waiting.
    @exclusivity(unchecked) var mayRead = true
    /// EPOLLRDHUP was seen: read until EOF instead of stopping at a short read.
    @exclusivity(unchecked) var sentFIN = false
    @exclusivity(unchecked) private var writeInterest = false
    @exclusivity(unchecked) var parser = HTTPResponseParser.forProxy()
    /// The lease came from the idle pool (it served a request before).
    @exclusivity(unchecked) private(set) var isReused = false
    /// A response byte arrived during the current lease.
    @exclusivity(unchecked) var receivedResponseByte = false
    /// The current response ended cleanly and the upstream allows reuse.
    @exclusivity(unchecked) var responseCompleteAndReusable = false

    private init(fd: Int32, pool: UpstreamPool) {
        self.fd = fd
        self.pool = pool
    }

    static func connect(to address: SocketAddress, pool: UpstreamPool, lessee: any UpstreamLessee) throws(IOError)
        -> UpstreamConnection
    {
        let fd = try SystemCalls.makeSocket(family: address.family)
        SystemCalls.setNoDelay(fd)
        let connection = UpstreamConnection(fd: fd, pool: pool)
        // Connect first, register after: an unconnected socket polls as EPOLLOUT|EPOLLHUP.
        let connected: Bool
        do {
            connected = try SystemCalls.connect(fd, to: address)
            connection.token = try pool.loop.register(fd: fd, handler: connection, writable: !connected)
            connection.writeInterest = !connected
        } catch {
            SystemCalls.close(fd)
            connection.state = .closed
            throw error
        }
        connection.lessee = lessee
        if connected {
            connection.state = .leased
        } else {
            pool.loop.setDeadline(token: connection.token, after: pool.connectTimeout)
        }
        return connection
    }

    var isCleanForReuse: Bool {
        self.state == .leased && self.responseCompleteAndReusable && (self.input?.isEmpty ?? true)
            && self.output.isEmpty
    }

    func lease(to lessee: any UpstreamLessee, reused: Bool) {
        self.lessee = lessee
        self.state = .leased
        self.isReused = reused
        self.receivedResponseByte = false
        self.responseCompleteAndReusable = false
    }

    func becomeIdle() {
        self.lessee = nil
        self.state = .idle
        // A buffered request body was copied into `output`: keep a head's worth, not the body's.
        self.output.shrink(toCapacity: 64 * 1024)
        self.pool.loop.setDeadline(token: self.token, after: nil)
    }

    func closeSocket() {
        guard self.state != .closed else { return }
        self.state = .closed
        self.lessee = nil
        self.pool.loop.deregister(fd: self.fd, token: self.token)
        SystemCalls.close(self.fd)
        self.input = nil
    }

    /// Writes queued output until EAGAIN. Returns false on a write error (connection dead).
    func flush() -> Bool {
        while !self.output.isEmpty {
            let readable = self.output.readableBytes
            do {
                switch try SystemCalls.write(self.fd, readable.baseAddress!, count: readable.count) {
                case .processed(let n): self.output.consume(n)
                case .wouldBlock, .endOfFile:
                    self.setWriteInterest(true)
                    return true
                }
            } catch {
                return false
            }
        }
        self.setWriteInterest(false)
        return true
    }

    private func setWriteInterest(_ writable: Bool) {
        guard writable != self.writeInterest, self.state != .closed else { return }
        self.writeInterest = writable
        self.pool.loop.setWritableInterest(fd: self.fd, token: self.token, writable)
    }

    func handleEvents(_ events: UInt32) {
        if events & EventLoop.readHangup != 0 { self.sentFIN = true }
        switch self.state {
        case .connecting:
            let err = SystemCalls.socketError(self.fd)
            if err == 0 {
                if events & (EventLoop.writable | EventLoop.readable) == 0 { return }
                self.pool.loop.setDeadline(token: self.token, after: nil)
                self.setWriteInterest(false)
                self.state = .leased
                self.isReused = false
                self.lessee?.upstreamReady(self)
            } else {
                let lessee = self.lessee
                self.pool.close(self)
                lessee?.upstreamFailed(.unavailable, connection: nil)
            }
        case .idle:
            if events & (EventLoop.readable | EventLoop.hangup | EventLoop.error) != 0 {
                self.pool.idleConnectionDied(self)
            }
        case .leased:
            if events & (EventLoop.readable | EventLoop.hangup | EventLoop.error) != 0 { self.mayRead = true }
            self.lessee?.upstreamEvents(self, events)
        case .closed:
            break
        }
    }

    func handleDeadline() {
        if self.state == .connecting {
            let lessee = self.lessee
            self.pool.close(self)
            lessee?.upstreamFailed(.timeout, connection: nil)
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
