import Dispatch
package import GatewayIO
import Glibc

// File length (~590 lines): one connection's whole lifecycle (connect, handshake commands, the
// pending queue, timeouts, reconnect backoff) shares state that is confined to one queue; split
// across files it would need that state widened from private. The pure parts live elsewhere
// (`RedisWireStateMachine`, `ReconnectBackoff`, `RedisPendingCommand`).

/// One pipelined connection to Redis (`RedisSocketDriver`: our own socket and TLS I/O,
/// hiredis' parser for the replies), with timeouts, a bounded number of commands in flight
/// and automatic reconnects.
///
/// - Queue: all state lives on `queue`: the connection's own serial queue, or an event loop's
///   (then the loop's epoll also drives the socket), so that a request verified on that loop
///   never changes thread.
///   `send` may be called from any queue; called on `queue` it runs at once, else it hops to
///   `queue`. Every completion runs on `queue`, exactly once, never inside `send` unless the
///   command fails at once (unavailable, overloaded).
/// - Pipelining: commands are written as they come, many in flight; Redis answers in order.
/// - Timeouts: each command completes with `StoreError.timeout` after
///   `configuration.commandTimeout`. Its reply, if it comes later, is dropped (replies are
///   ordered, so it is recognised as the reply of that command and never given to another).
///   The command keeps its place among the `maxPendingCommands` until then. If the oldest
///   command stays unanswered for `staleConnectionTimeout`, the connection is reset: that is
///   what a half-open TCP connection or a hung server looks like.
/// - Availability: while there is no connection (after a failure, during the reconnect
///   backoff), commands fail at once with `StoreError.unavailable`. Commands sent during the
///   very first connect, or during the immediate reconnect after a healthy connection broke,
///   are queued on that attempt (and bounded by their timeout).
/// - Connect: `AUTH` (password in the URL), `SELECT` (database ≠ 0) and `SCRIPT LOAD` of
///   every registered script are sent first; the connection counts as ready once all
///   succeeded, within `connectTimeout`. A refused AUTH counts as a failed attempt.
/// - Reconnect: exponential backoff from `reconnectBackoffInitial` up to
///   `reconnectBackoffMaximum`, reset once a connection is ready.
/// - Host names are resolved by `hostResolver` on its own queue (getaddrinfo blocks: never on
///   `queue`, which may be an event loop's); the attempt waits for the answer (commands fail
///   fast meanwhile, as while a sentinel is asked) and then connects on `queue`. The address
///   is kept for the reconnect after a healthy connection broke (commands wait on that
///   attempt, as with an IP literal) and looked up again after a failed attempt.
/// - TLS (`rediss://`): `tls` gives the trust anchors, client certificate and server name;
///   the certificate is always verified, and a failed handshake fails the attempt with
///   OpenSSL's reason (shown in `/readyz` and store errors).
/// - Pub/Sub: with `subscriptions`, `SUBSCRIBE` to them is part of every connect, and each
///   message goes to `onPush` (on `queue`). Such a connection sends nothing else.
package final class RedisConnection: @unchecked Sendable {
    package let url: RedisURL
    package let configuration: RedisConfiguration
    /// `configuration.commandTimeout`, and how much longer the oldest command may wait before
    /// the connection counts as stale, in nanoseconds: converted once, not per command
    /// (`Duration.components` is 128-bit arithmetic, ~190 instructions a call).
    private let commandTimeoutNanoseconds: UInt64
    private let staleExtraNanoseconds: UInt64
    package let queue: WorkQueue
    /// The event loop whose queue and epoll the connection uses, if any.
    private let loop: EventLoop?
    /// Names the connection in logs (`connection` field): the store has one per event loop.
    package let label: String
    private let scripts: [RedisScript]
    /// Readiness, live objects and event counts (for /readyz, /metrics and tests).
    package let counters = RedisConnectionCounters()
    /// Sentinel mode: asked for the primary before every connect; `ROLE` is checked after it.
    private let resolver: RedisSentinelResolver?
    /// `rediss://`: TLS on every connect.
    private let tls: RedisTLS?
    /// Pub/Sub channels subscribed at every connect, and where their messages go.
    private let subscriptions: [String]
    private let onPush: (@Sendable (RedisReply) -> Void)?
    /// Looks host names up off `queue`.
    private let hostResolver: HostResolver

    private enum State {
        case idle
        case connecting(RedisSocketDriver, deadline: UInt64, acceptsCommands: Bool, setupRemaining: Int)
        case ready(RedisSocketDriver)
        /// No connection; a reconnect is scheduled.
        case waiting(reason: String)
        case closed
    }

    // All below: confined to `queue`.
    private var state: State = .idle
    private var pending = DeadlineQueue<RedisPendingCommand>()
    private var backoff: ReconnectBackoff
    private var timer: WorkTimer?
    private var timerDeadline: UInt64?
    /// Bumped on every scheduled reconnect so that a stale one does nothing.
    private var reconnectGeneration = 0
    private var hasLoggedOutage = false
    private var hasBeenReady = false
    /// Why the last attempt failed (wrong password, refused, ...): reported while reconnecting,
    /// so `/readyz` and store errors say why, not only that.
    private var lastFailure: String?
    /// The current attempt was refused for a reason that retrying cannot mend (a setup
    /// command refused: wrong password, unknown user, no such database).
    private var attemptRefusedByServer = false
    /// Sentinel mode: the node of the current attempt or connection.
    private var resolvedNode: RedisNodeAddress?
    /// The last address a host name resolved to; cleared when an attempt fails.
    private var resolvedHost: (host: String, port: UInt16, address: SocketAddress)?
    /// Set on `queue`: tells `send` that its caller already runs there.
    private let onQueueKey = DispatchSpecificKey<Bool>()

    /// - Parameter loop: the event loop to live on: its queue, and its epoll drives the socket
    ///   (`RedisSocketDriver`); nil creates a queue named `label` and uses Dispatch sources.
    package init(
        url: RedisURL,
        configuration: RedisConfiguration = RedisConfiguration(),
        scripts: [RedisScript] = [],
        label: String = "attest-gateway.redis",
        loop: EventLoop? = nil,
        resolver: RedisSentinelResolver? = nil,
        tls: RedisTLS? = nil,
        subscriptions: [String] = [],
        onPush: (@Sendable (RedisReply) -> Void)? = nil,
        hostResolver: HostResolver = .redis
    ) {
        self.hostResolver = hostResolver
        self.tls = tls
        self.subscriptions = subscriptions
        self.onPush = subscriptions.isEmpty ? nil : onPush
        // A peer that closed must give EPIPE, not kill the process (the TLS BIO uses write(2)).
        _ = SystemCalls.ignoreSIGPIPE
        self.resolver = resolver
        self.url = url
        var configuration = configuration
        configuration.maxPendingCommands = max(1, configuration.maxPendingCommands)
        configuration.staleConnectionTimeout = max(configuration.staleConnectionTimeout, configuration.commandTimeout)
        self.configuration = configuration
        self.commandTimeoutNanoseconds = configuration.commandTimeout.nanoseconds
        self.staleExtraNanoseconds = (configuration.staleConnectionTimeout - configuration.commandTimeout).nanoseconds
        self.scripts = scripts
        self.label = label
        self.loop = loop
        self.queue = WorkQueue(loop: loop, label: label)
        self.queue.setSpecific(key: self.onQueueKey, value: true)
        self.backoff = ReconnectBackoff(
            initial: configuration.reconnectBackoffInitial,
            maximum: configuration.reconnectBackoffMaximum
        )
    }

    deinit {
        self.timer?.cancel()
        self.queue.setSpecific(key: self.onQueueKey, value: nil)
    }

    /// True when the caller runs on `queue`.
    private var isOnQueue: Bool { DispatchQueue.getSpecific(key: self.onQueueKey) == true }

    /// Starts connecting (asynchronously).
    package func start() {
        self.queue.async { [self] in
            guard case .idle = self.state else { return }
            self.makeTimer()
            self.connect(acceptsCommands: true)
        }
    }

    /// Closes the connection: commands in flight complete with `unavailable`, later ones too.
    /// `completion` runs on `queue` once the connection is closed and every command completed.
    package func close(completion: (@Sendable () -> Void)? = nil) {
        self.queue.async { [self] in
            self.closeOnQueue()
            completion?()
        }
    }

    /// Sends one command. `completion` runs on `queue` with the reply (an error reply is a
    /// `.success(.error)`: the caller decides what it means) or a `StoreError`.
    package func send(_ arguments: [[UInt8]], completion: @escaping @Sendable (Result<RedisReply, StoreError>) -> Void)
    {
        if self.isOnQueue {
            self.sendOnQueue(arguments, completion: completion)
        } else {
            self.queue.async { [self] in self.sendOnQueue(arguments, completion: completion) }
        }
    }

    /// `EVALSHA`; on `NOSCRIPT` (script cache flushed, failover) loads the script and
    /// retries once.
    package func evaluate(
        _ script: RedisScript,
        keys: [[UInt8]],
        arguments: [[UInt8]],
        completion: @escaping @Sendable (Result<RedisReply, StoreError>) -> Void
    ) {
        let command = script.evalshaCommand(keys: keys, arguments: arguments)
        self.send(command) { [self] result in
            guard case .success(let reply) = result, reply.errorCode == "NOSCRIPT" else {
                completion(result)
                return
            }
            Log.warning(
                "redis_script_reloaded",
                [("redis", self.url.description), ("connection", self.label), ("sha1", script.sha1)])
            self.sendOnQueue([Array("SCRIPT".utf8), Array("LOAD".utf8), Array(script.source.utf8)]) { _ in }
            self.sendOnQueue(command, completion: completion)
        }
    }

    // MARK: - Commands (on queue)

    private func sendOnQueue(_ arguments: [[UInt8]], completion: @escaping (Result<RedisReply, StoreError>) -> Void) {
        assertOnQueue(self.queue)
        let driver: RedisSocketDriver
        switch self.state {
        case .ready(let d):
            driver = d
        case .connecting(let d, _, let acceptsCommands, _) where acceptsCommands:
            driver = d
        case .connecting:
            let why = self.lastFailure.map { " (last attempt: \($0))" } ?? ""
            completion(.failure(StoreError(.unavailable, "redis \(self.url) is reconnecting\(why)")))
            return
        case .waiting(let reason):
            let refusal = self.lastFailure == nil ? self.resolver?.refusal.map { "; \($0)" } ?? "" : ""
            completion(.failure(StoreError(.unavailable, "redis \(self.url) is unavailable (\(reason)\(refusal))")))
            return
        case .idle:
            completion(.failure(StoreError(.unavailable, "redis connection \(self.url) was not started")))
            return
        case .closed:
            completion(.failure(StoreError(.unavailable, "redis connection \(self.url) is closed")))
            return
        }
        guard self.pending.count < self.configuration.maxPendingCommands else {
            completion(
                .failure(
                    StoreError(
                        .overloaded,
                        "\(self.pending.count) redis commands in flight (max \(self.configuration.maxPendingCommands))"
                    )
                )
            )
            return
        }
        let command = RedisPendingCommand(arguments: arguments, counters: self.counters, completion: completion)
        guard driver.submit(command) else {
            command.finish(.connectionClosed("redis \(self.url): connection is closing"), timeout: .zero)
            return
        }
        command.didSubmit()
        command.isTracked = true
        let now = DispatchTime.now().uptimeNanoseconds
        self.pending.append(command, deadline: now &+ self.commandTimeoutNanoseconds)
        self.rearmTimer()
    }

    /// Called by the driver for each command: its reply, or its end when the driver closes.
    func commandDidFinish(
        _ command: RedisPendingCommand,
        outcome: RedisPendingCommand.Outcome,
        driver: RedisSocketDriver
    ) {
        assertOnQueue(self.queue)
        if command.isTracked {
            // Replies come in order: this is the oldest tracked command in flight.
            if let first = self.pending.popFirst(), first.element !== command {
                // Our invariant broke (never seen): fail safe rather than mismatch replies.
                Log.error(
                    "redis_reply_order_violated",
                    [("redis", self.url.description), ("connection", self.label), ("command", command.name)])
                first.element.finish(.connectionClosed("redis \(self.url): reply order lost"), timeout: .zero)
                driver.close(reason: "redis \(self.url): reply order lost, connection reset")
            }
        }
        command.finish(outcome, timeout: self.configuration.commandTimeout)
    }

    // MARK: - Connection life cycle (on queue)

    private func connect(acceptsCommands: Bool) {
        assertOnQueue(self.queue)
        guard let resolver = self.resolver else {
            self.connect(to: self.url.address, acceptsCommands: acceptsCommands)
            return
        }
        // Sentinel mode: ask for the primary first (commands fail fast meanwhile).
        self.counters.connectAttempted()
        self.reconnectGeneration &+= 1
        let generation = self.reconnectGeneration
        // Keep why the last attempt failed (an untrusted sentinel certificate): commands that
        // fail meanwhile, and readiness, say so instead of only "asking".
        let why = self.lastFailure.map { "; last attempt: \($0)" } ?? ""
        self.state = .waiting(reason: "asking the sentinels for the primary of \(resolver.masterName)\(why)")
        resolver.resolve { [weak self] result in
            guard let self else { return }
            self.queue.async {
                guard generation == self.reconnectGeneration, case .waiting = self.state else { return }
                switch result {
                case .success(let node):
                    self.resolvedNode = node
                    self.connect(to: .tcp(host: node.host, port: node.port), acceptsCommands: false)
                case .failure(let error):
                    self.attemptFailed(error.description, isConfiguration: error.isConfiguration)
                }
            }
        }
    }

    /// Sentinel mode: the sentinels name another primary; leave this one (a reconnect asks again).
    func primaryDidChange(to primary: RedisNodeAddress) {
        self.queue.async { [self] in
            guard let node = self.resolvedNode, node != primary else { return }
            switch self.state {
            case .ready(let driver), .connecting(let driver, _, _, _):
                driver.close(reason: "redis \(node): sentinel switched the primary to \(primary)")
            default:
                break
            }
        }
    }

    private func connect(to address: RedisURL.Address, acceptsCommands: Bool) {
        if self.resolver == nil { self.counters.connectAttempted() }
        self.attemptRefusedByServer = false
        guard self.tls != nil || !self.url.usesTLS else {
            // Never fall back to plain TCP for a rediss:// URL.
            self.attemptFailed("redis \(address.endpoint): rediss:// without TLS settings", isConfiguration: true)
            return
        }
        guard case .tcp(let host, let port) = address, SocketAddress(ipLiteral: host, port: port) == nil else {
            self.open(address, resolved: nil, acceptsCommands: acceptsCommands)
            return
        }
        if let known = self.resolvedHost, known.host == host, known.port == port {
            self.open(address, resolved: known.address, acceptsCommands: acceptsCommands)
            return
        }
        // A name: look it up off this queue, then come back (a newer attempt or a close in
        // between makes the answer stale).
        self.reconnectGeneration &+= 1
        let generation = self.reconnectGeneration
        self.state = .waiting(reason: "resolving \(address.endpoint)")
        self.hostResolver.resolve(host: host, port: port) { [weak self] result in
            guard let self else { return }
            self.queue.async {
                guard generation == self.reconnectGeneration, case .waiting = self.state else { return }
                switch result {
                case .success(let resolved):
                    self.resolvedHost = (host, port, resolved)
                    self.open(address, resolved: resolved, acceptsCommands: acceptsCommands)
                case .failure(let error):
                    self.attemptFailed("redis \(address.endpoint): \(error)")
                }
            }
        }
    }

    /// Opens the socket (to `resolved` for a host name) and sends the setup commands.
    private func open(_ address: RedisURL.Address, resolved: SocketAddress?, acceptsCommands: Bool) {
        let driver: RedisSocketDriver
        switch RedisSocketDriver.connect(
            to: address, resolved: resolved, tls: self.tls, acceptsPushes: self.onPush != nil, queue: self.queue,
            loop: self.loop, counters: self.counters)
        {
        case .success(let connected):
            driver = connected
        case .failure(let error):
            self.attemptFailed(error.description)
            return
        }
        driver.connection = self
        let setup = self.setupCommands()
        let deadline = DispatchTime.now().uptimeNanoseconds &+ self.configuration.connectTimeout.nanoseconds
        self.state = .connecting(
            driver,
            deadline: deadline,
            acceptsCommands: acceptsCommands,
            setupRemaining: setup.count
        )
        for (name, arguments) in setup {
            let command = RedisPendingCommand(arguments: arguments, counters: self.counters) {
                [weak self, weak driver] result in
                guard let self, let driver else { return }
                self.setupCommandDidFinish(name, result: result, driver: driver)
            }
            guard driver.submit(command) else { break }  // the context is already closing
            command.didSubmit()
        }
        self.rearmTimer()
    }

    private func setupCommands() -> [(String, [[UInt8]])] {
        var setup: [(String, [[UInt8]])] = []
        if let password = self.url.password {
            // ACL user (Redis ≥ 6): AUTH user password; else the default user: AUTH password.
            let user = self.url.username.map { [Array($0.utf8)] } ?? []
            setup.append(("AUTH", [Array("AUTH".utf8)] + user + [Array(password.utf8)]))
        }
        if self.resolver != nil {
            setup.append(("ROLE", [Array("ROLE".utf8)]))
        }
        if self.url.database != 0 {
            setup.append(("SELECT", [Array("SELECT".utf8), Array(String(self.url.database).utf8)]))
        }
        for script in self.scripts {
            setup.append(("SCRIPT LOAD", [Array("SCRIPT".utf8), Array("LOAD".utf8), Array(script.source.utf8)]))
        }
        // Last: after SUBSCRIBE the server takes only Pub/Sub commands.
        for channel in self.subscriptions {
            setup.append(("SUBSCRIBE", [Array("SUBSCRIBE".utf8), Array(channel.utf8)]))
        }
        if setup.isEmpty {
            setup.append(("PING", [Array("PING".utf8)]))
        }
        return setup
    }

    private func setupCommandDidFinish(
        _ name: String,
        result: Result<RedisReply, StoreError>,
        driver: RedisSocketDriver
    ) {
        guard case .connecting(let current, let deadline, let acceptsCommands, let remaining) = self.state,
            current === driver
        else {
            return
        }
        switch result {
        case .failure:
            return  // the driver is closing; driverDidClose handles the attempt
        case .success(.error(let message)):
            // Wrong password, bad database, no scripting: retrying fast will not help. A server
            // that is only busy (loading its data, a script running) will get better.
            let code = message.split(separator: " ", maxSplits: 1).first.map(String.init) ?? ""
            self.attemptRefusedByServer = !Self.transientErrorCodes.contains(code)
            driver.close(reason: "redis \(driver.endpoint): \(name) refused: \(message)")
        case .success(let reply) where name == "ROLE" && !Self.isPrimaryRole(reply):
            // A sentinel named a node that is (now) a replica: never write counters there.
            driver.close(reason: "redis \(driver.endpoint): is not a primary (ROLE \(reply.roleName)), refused")
        case .success:
            if remaining > 1 {
                self.state = .connecting(
                    driver,
                    deadline: deadline,
                    acceptsCommands: acceptsCommands,
                    setupRemaining: remaining - 1
                )
                return
            }
            self.state = .ready(driver)
            self.counters.setReady(true)
            self.backoff.reset()
            self.lastFailure = nil
            self.counters.setLastFailure(nil)
            // Logged at start and after an outage, not on every reconnect attempt.
            if self.hasLoggedOutage || !self.hasBeenReady {
                self.hasLoggedOutage = false
                self.hasBeenReady = true
                if self.configuration.logsConnectionEvents {
                    Log.info("redis_connected", [("redis", self.url.description), ("connection", self.label)])
                }
            }
            self.rearmTimer()
        }
    }

    /// A Pub/Sub message from the driver.
    func didReceivePush(_ reply: RedisReply) {
        assertOnQueue(self.queue)
        self.onPush?(reply)
    }

    /// Error replies of a server that will answer later (not a configuration problem).
    static let transientErrorCodes: Set<String> = ["LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "OOM"]

    /// `ROLE` answers `["master", offset, replicas]` on a primary.
    static func isPrimaryRole(_ reply: RedisReply) -> Bool {
        guard case .array(let items) = reply, let first = items.first else { return false }
        return first.text == "master"
    }

    /// From the driver, once it closed and completed every command on it.
    func driverDidClose(_ driver: RedisSocketDriver, reason: String) {
        assertOnQueue(self.queue)
        switch self.state {
        case .connecting(let current, _, _, _) where current === driver:
            self.failLeftovers(reason)
            self.attemptFailed(reason, isConfiguration: self.attemptRefusedByServer || driver.failedInHandshake)
        case .ready(let current) where current === driver:
            self.counters.setReady(false)
            self.failLeftovers(reason)
            if self.configuration.logsConnectionEvents {
                Log.warning(
                    "redis_connection_lost",
                    [("redis", self.url.description), ("connection", self.label), ("reason", reason)])
            }
            self.hasLoggedOutage = true
            // Reconnect at once; commands wait on that attempt.
            self.state = .waiting(reason: reason)
            self.connect(acceptsCommands: true)
        default:
            self.failLeftovers(reason)
        }
    }

    /// The driver completes every command before it reports its close, so this finds nothing
    /// unless that contract breaks; then it still completes every caller exactly once.
    private func failLeftovers(_ reason: String) {
        for command in self.pending.removeAll() {
            command.finish(.connectionClosed(reason), timeout: .zero)
        }
    }

    /// - Parameter isConfiguration: the server refused us (TLS verification, AUTH, SELECT):
    ///   a start-up check turns that into an error (`RedisStore.firstConnectFailure`).
    private func attemptFailed(_ reason: String, isConfiguration: Bool = false) {
        guard !self.isClosed else { return }
        // The name may point elsewhere now: the next attempt looks it up again.
        self.resolvedHost = nil
        if !self.hasLoggedOutage {
            self.hasLoggedOutage = true
            if self.configuration.logsConnectionEvents {
                Log.warning(
                    "redis_unavailable",
                    [("redis", self.url.description), ("connection", self.label), ("reason", reason)])
            }
        }
        self.state = .waiting(reason: reason)
        self.lastFailure = reason
        self.counters.setLastFailure(RedisConnectFailure(reason: reason, isConfiguration: isConfiguration))
        let delay = self.backoff.nextDelay()
        self.reconnectGeneration &+= 1
        let generation = self.reconnectGeneration
        self.queue.asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: delay.nanoseconds))) { [weak self] in
            guard let self, generation == self.reconnectGeneration, case .waiting = self.state else { return }
            self.connect(acceptsCommands: false)
        }
    }

    private var isClosed: Bool {
        if case .closed = self.state { return true }
        return false
    }

    private func closeOnQueue() {
        let driver: RedisSocketDriver?
        switch self.state {
        case .connecting(let d, _, _, _): driver = d
        case .ready(let d): driver = d
        default: driver = nil
        }
        self.state = .closed
        self.counters.setReady(false)
        self.reconnectGeneration &+= 1
        driver?.close(reason: "redis \(self.url): connection closed by the gateway")
        self.failLeftovers("redis \(self.url): connection closed by the gateway")
        self.timer?.cancel()
        self.timer = nil
    }

    // MARK: - Deadlines (on queue)

    private func makeTimer() {
        self.timer = self.queue.makeTimer(leeway: .milliseconds(2)) { [weak self] in self?.timerFired() }
    }

    /// Arms the timer for the earliest deadline if it is not armed earlier already. An early
    /// fire is harmless (it finds nothing due and re-arms), so replies never re-arm it.
    private func rearmTimer() {
        guard let timer = self.timer else { return }
        var next = self.pending.nextDeadline
        if let oldest = self.pending.oldestDeadline {
            next = min(next ?? UInt64.max, oldest &+ self.staleExtraNanoseconds)
        }
        if case .connecting(_, let deadline, _, _) = self.state {
            next = min(next ?? UInt64.max, deadline)
        }
        guard let next else { return }
        if let armed = self.timerDeadline, armed <= next { return }
        self.timerDeadline = next
        timer.schedule(deadline: DispatchTime(uptimeNanoseconds: next))
    }

    private func timerFired() {
        self.timerDeadline = nil
        let now = DispatchTime.now().uptimeNanoseconds
        if case .connecting(let driver, let deadline, _, _) = self.state, now >= deadline {
            let phase = driver.isHandshaking ? " in the TLS handshake (is it a TLS port?)" : ""
            driver.close(
                reason:
                    "redis \(driver.endpoint): connect timed out after \(self.configuration.connectTimeout.milliseconds) ms\(phase)"
            )
        }
        for command in self.pending.expire(now: now) {
            self.counters.commandTimedOut()
            command.finish(.timedOut, timeout: self.configuration.commandTimeout)
        }
        if let oldest = self.pending.oldestDeadline {
            if now >= oldest &+ self.staleExtraNanoseconds, case .ready(let driver) = self.state {
                driver.close(
                    reason:
                        "redis \(driver.endpoint): no reply for \(self.configuration.staleConnectionTimeout.milliseconds) ms, connection reset"
                )
            }
        }
        self.rearmTimer()
    }
}

extension RedisReply {
    /// The role word of a `ROLE` reply, for messages.
    fileprivate var roleName: String {
        guard case .array(let items) = self, let first = items.first?.text else { return self.summary }
        return first
    }
}
