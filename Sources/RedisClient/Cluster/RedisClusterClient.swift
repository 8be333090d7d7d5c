import Dispatch
package import GatewayIO
import Synchronization

/// A Redis Cluster seen from one queue (an event loop's, or its own): the slot map, one
/// `RedisConnection` per primary on that queue (and that loop's epoll), and the routing of
/// every command to the primary of its key's slot.
///
/// - Discovery: `CLUSTER SHARDS` (Redis ≥ 7; `CLUSTER SLOTS` when the server does not know
///   it) asked of the known primaries, then of the seeds, in order; the first readable answer
///   wins. Commands sent before the first map wait for it.
/// - Refresh: every `topologyRefreshInterval`, after every `MOVED`, `CLUSTERDOWN`, unassigned
///   slot or lost node connection; at most one query in flight and one redirect-driven
///   refresh per `minimumRefreshInterval`.
/// - Redirects: `RedisRedirectPolicy` decides (`MOVED` updates the map and resends, `ASK`
///   resends behind `ASKING`, `TRYAGAIN`/`CLUSTERDOWN` resend after a bounded backoff), within
///   `maximumAttempts`. Only replies that prove the command did not run are retried.
/// - Primaries only: the map holds primaries; replicas are never asked for data.
///
/// Confined to `queue`; `allConnections` and `isReady` are snapshots readable anywhere.
package final class RedisClusterClient: RedisCommandRouting, @unchecked Sendable {
    package let queue: WorkQueue
    private let seeds: [RedisNodeAddress]
    private let username: String?
    private let password: String?
    private let configuration: RedisConfiguration
    private let policy: RedisRedirectPolicy
    private let scripts: [RedisScript]
    private let label: String
    private let loop: EventLoop?
    private let counters: RedisClusterCounters
    private let topologyRefreshInterval: Duration
    private let minimumRefreshInterval: Duration = .milliseconds(100)

    private enum Command {
        case plain([[UInt8]])
        case script(RedisScript, keys: [[UInt8]], arguments: [[UInt8]])
    }

    // Confined to `queue`.
    private var map = RedisSlotMap()
    private var hasMap = false
    private var nodes: [RedisNodeAddress: RedisConnection] = [:]
    private var isRefreshing = false
    private var lastRefresh: UInt64 = 0
    private var isRefreshRequested = false
    /// Commands that arrived before the first map: resumed by it, failed if it cannot be had.
    private var awaitingMap: [(resume: () -> Void, fail: (StoreError) -> Void)] = []
    private var timer: WorkTimer?
    private var isClosed = false
    private let onQueueKey = DispatchSpecificKey<Bool>()
    /// `rediss-cluster://`: TLS to every node.
    private let tls: RedisTLS?

    // Readable from any queue.
    private let connectionSnapshot = Mutex<[RedisConnection]>([])
    private let primarySnapshot = Mutex<[RedisConnection]>([])
    private let mapIsComplete = Atomic<Bool>(false)

    package init(
        seeds: [RedisNodeAddress],
        username: String?,
        password: String?,
        configuration: RedisConfiguration,
        policy: RedisRedirectPolicy = RedisRedirectPolicy(),
        topologyRefreshInterval: Duration = .seconds(10),
        scripts: [RedisScript],
        label: String,
        loop: EventLoop?,
        counters: RedisClusterCounters,
        tls: RedisTLS? = nil
    ) {
        self.tls = tls
        self.seeds = seeds
        self.username = username
        self.password = password
        self.configuration = configuration
        self.policy = policy
        self.topologyRefreshInterval = topologyRefreshInterval
        self.scripts = scripts
        self.label = label
        self.loop = loop
        self.counters = counters
        self.queue = WorkQueue(loop: loop, label: label)
        self.queue.setSpecific(key: self.onQueueKey, value: true)
        // Nobody else holds `self` yet: the seed connections can be made off the queue.
        for seed in seeds where self.nodes[seed] == nil {
            _ = self.connection(for: seed)
        }
        self.queue.async { [self] in
            self.makeTimer()
            self.startRefresh()
        }
    }

    deinit {
        self.timer?.cancel()
        self.queue.setSpecific(key: self.onQueueKey, value: nil)
    }

    package var allConnections: [RedisConnection] { self.connectionSnapshot.withLock { $0 } }

    package var isReady: Bool {
        guard self.mapIsComplete.load(ordering: .relaxed) else { return false }
        let primaries = self.primarySnapshot.withLock { $0 }
        return !primaries.isEmpty && primaries.allSatisfy { $0.counters.isReady }
    }

    private func onQueue(_ body: @escaping @Sendable () -> Void) {
        if DispatchQueue.getSpecific(key: self.onQueueKey) == true {
            body()
        } else {
            self.queue.async(execute: body)
        }
    }

    // MARK: - Commands

    package func send(
        _ arguments: [[UInt8]], key: [UInt8]?, completion: @escaping @Sendable (Result<RedisReply, StoreError>) -> Void
    ) {
        let slot = key.map { RedisHashSlot.slot(of: $0) } ?? 0
        self.onQueue { [self] in self.route(.plain(arguments), slot: slot, attempt: 1, asking: nil, completion) }
    }

    package func evaluate(
        _ script: RedisScript, keys: [[UInt8]], arguments: [[UInt8]],
        completion: @escaping @Sendable (Result<RedisReply, StoreError>) -> Void
    ) {
        let slot = keys.first.map { RedisHashSlot.slot(of: $0) } ?? 0
        self.onQueue { [self] in
            self.route(
                .script(script, keys: keys, arguments: arguments), slot: slot, attempt: 1, asking: nil, completion)
        }
    }

    package func pingAll(completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        self.onQueue { [self] in
            guard self.hasMap, self.map.unassignedSlotCount == 0 else {
                let missing = self.hasMap ? "\(self.map.unassignedSlotCount) slots have no primary" : "no slot map yet"
                completion(.failure(StoreError(.unavailable, "redis cluster \(self.seedText): \(missing)")))
                return
            }
            let connections = self.map.primaries.map { self.connection(for: $0) }
            let outcome = Mutex<(remaining: Int, done: Bool)>((connections.count, false))
            for connection in connections {
                connection.pingAll { result in
                    let finish = outcome.withLock { state -> Bool in
                        guard !state.done else { return false }
                        state.remaining -= 1
                        if case .failure = result { state.done = true } else { state.done = state.remaining == 0 }
                        return state.done
                    }
                    if finish { completion(result) }
                }
            }
        }
    }

    /// Every primary of the slot map (waits for the first map; none if it cannot be had).
    package func withPrimaryConnections(_ body: @escaping @Sendable ([RedisConnection]) -> Void) {
        self.onQueue { [self] in
            if self.hasMap {
                body(self.map.primaries.map { self.connection(for: $0) })
                return
            }
            self.awaitingMap.append(
                (
                    resume: { [self] in self.withPrimaryConnections(body) },
                    fail: { _ in body([]) }
                ))
            self.startRefresh()
        }
    }

    private var seedText: String { self.seeds.map(\.description).joined(separator: ",") }

    private func route(
        _ command: Command,
        slot: Int,
        attempt: Int,
        asking: RedisNodeAddress?,
        _ completion: @escaping @Sendable (Result<RedisReply, StoreError>) -> Void
    ) {
        assertOnQueue(self.queue)
        if self.isClosed {
            completion(.failure(StoreError(.unavailable, "redis cluster \(self.seedText): closed")))
            return
        }
        if !self.hasMap {
            guard self.awaitingMap.count < self.configuration.maxPendingCommands else {
                completion(
                    .failure(StoreError(.overloaded, "\(self.awaitingMap.count) commands wait for the slot map")))
                return
            }
            self.awaitingMap.append(
                (
                    resume: { [self] in self.route(command, slot: slot, attempt: attempt, asking: asking, completion) },
                    fail: { completion(.failure($0)) }
                ))
            self.startRefresh()
            return
        }
        let target: RedisNodeAddress
        if let asking {
            target = asking
        } else if let primary = self.map.primary(forSlot: slot) {
            target = primary
        } else {
            self.perform(
                self.policy.actionForUnassignedSlot(slot, attempt: attempt), reply: .null, command: command,
                slot: slot, attempt: attempt, completion)
            return
        }
        let connection = self.connection(for: target)
        if asking != nil {
            connection.send([Array("ASKING".utf8)]) { _ in }
        }
        let handler: @Sendable (Result<RedisReply, StoreError>) -> Void = { [self] result in
            // On this client's queue (inline when the node connection shares it, as on a loop):
            // redirects update the map and route again.
            self.onQueue { [self] in
                switch result {
                case .failure(let error):
                    // The command may have run: never resent. The node may be gone: look again.
                    if error.kind == .unavailable || error.kind == .timeout { self.requestRefresh() }
                    completion(.failure(error))
                case .success(let reply):
                    var errorText: String?
                    if case .error(let text) = reply { errorText = text }
                    let action = self.policy.action(errorText: errorText, from: target, attempt: attempt)
                    self.perform(action, reply: reply, command: command, slot: slot, attempt: attempt, completion)
                }
            }
        }
        switch command {
        case .plain(let arguments):
            connection.send(arguments, completion: handler)
        case .script(let script, let keys, let arguments):
            connection.evaluate(script, keys: keys, arguments: arguments, completion: handler)
        }
    }

    private func perform(
        _ action: RedisRedirectPolicy.Action,
        reply: RedisReply,
        command: Command,
        slot: Int,
        attempt: Int,
        _ completion: @escaping @Sendable (Result<RedisReply, StoreError>) -> Void
    ) {
        switch action {
        case .complete:
            completion(.success(reply))
        case .moved(let movedSlot, let node):
            self.counters.movedRedirect()
            self.map.assign(slot: movedSlot, to: node)
            self.requestRefresh()
            self.route(command, slot: slot, attempt: attempt + 1, asking: nil, completion)
        case .ask(let node):
            self.counters.askRedirect()
            self.route(command, slot: slot, attempt: attempt + 1, asking: node, completion)
        case .retry(let delay, let refresh):
            self.counters.retriedLater()
            if refresh { self.requestRefresh() }
            self.queue.asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: delay.nanoseconds))) { [self] in
                self.route(command, slot: slot, attempt: attempt + 1, asking: nil, completion)
            }
        case .fail(let error):
            completion(.failure(error.storeError))
        }
    }

    private func connection(for node: RedisNodeAddress) -> RedisConnection {
        if let existing = self.nodes[node] { return existing }
        let connection = RedisConnection(
            url: RedisURL(node: node, username: self.username, password: self.password, usesTLS: self.tls != nil),
            configuration: self.configuration,
            scripts: self.scripts,
            label: "\(self.label).\(node)",
            loop: self.loop,
            tls: self.tls
        )
        self.nodes[node] = connection
        connection.start()
        self.publishSnapshots()
        return connection
    }

    private func publishSnapshots() {
        let all = Array(self.nodes.values)
        let primaries = self.hasMap ? self.map.primaries.compactMap { self.nodes[$0] } : []
        self.connectionSnapshot.withLock { $0 = all }
        self.primarySnapshot.withLock { $0 = primaries }
        self.mapIsComplete.store(self.hasMap && self.map.unassignedSlotCount == 0, ordering: .relaxed)
    }

    // MARK: - Topology

    /// A redirect or a lost node: refresh now, or once `minimumRefreshInterval` has passed.
    private func requestRefresh() {
        guard !self.isClosed else { return }
        let now = DispatchTime.now().uptimeNanoseconds
        let earliest = self.lastRefresh &+ self.minimumRefreshInterval.nanoseconds
        if now >= earliest {
            self.startRefresh()
        } else if !self.isRefreshRequested {
            self.isRefreshRequested = true
            self.queue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: earliest)) { [self] in
                self.isRefreshRequested = false
                self.startRefresh()
            }
        }
    }

    private func startRefresh() {
        assertOnQueue(self.queue)
        guard !self.isRefreshing, !self.isClosed else { return }
        self.isRefreshing = true
        self.lastRefresh = DispatchTime.now().uptimeNanoseconds
        var candidates = self.map.primaries
        for seed in self.seeds where !candidates.contains(seed) { candidates.append(seed) }
        self.query(candidates, index: 0, failures: [])
    }

    private func query(_ candidates: [RedisNodeAddress], index: Int, failures: [String]) {
        guard index < candidates.count else {
            self.refreshDidFinish(.failure(.noSeedAnswered(failures.joined(separator: "; "))))
            return
        }
        let node = candidates[index]
        self.fetchMap(from: node) { [self] result in
            // A node connection completes on its own queue, which is not this client's when the
            // client serves callers off the loops: the map and the waiting commands are ours.
            self.onQueue { [self] in
                switch result {
                case .success(let map) where map.primaries.isEmpty:
                    self.query(candidates, index: index + 1, failures: failures + ["\(node): no slots assigned"])
                case .success(let map):
                    self.refreshDidFinish(.success(map))
                case .failure(let error):
                    self.query(candidates, index: index + 1, failures: failures + ["\(node): \(error)"])
                }
            }
        }
    }

    private func fetchMap(
        from node: RedisNodeAddress,
        completion: @escaping @Sendable (Result<RedisSlotMap, RedisClusterError>) -> Void
    ) {
        let connection = self.connection(for: node)
        connection.send([Array("CLUSTER".utf8), Array("SHARDS".utf8)]) { result in
            switch result {
            case .failure(let error):
                completion(.failure(.noSeedAnswered(error.reason)))
            case .success(.error(let text)) where text.lowercased().contains("unknown subcommand"):
                connection.send([Array("CLUSTER".utf8), Array("SLOTS".utf8)]) { result in
                    completion(
                        Self.decode(result, node: node) { (reply) throws(RedisClusterError) in
                            try RedisSlotMap(clusterSlots: reply, seedHost: node.host)
                        })
                }
            case .success:
                completion(
                    Self.decode(result, node: node) { (reply) throws(RedisClusterError) in
                        try RedisSlotMap(clusterShards: reply, seedHost: node.host, usesTLS: self.tls != nil)
                    })
            }
        }
    }

    private static func decode(
        _ result: Result<RedisReply, StoreError>,
        node: RedisNodeAddress,
        _ parse: (RedisReply) throws(RedisClusterError) -> RedisSlotMap
    ) -> Result<RedisSlotMap, RedisClusterError> {
        switch result {
        case .failure(let error):
            return .failure(.noSeedAnswered(error.reason))
        case .success(.error(let text)):
            return .failure(.noSeedAnswered("refused: \(text.prefix(120))"))
        case .success(let reply):
            do throws(RedisClusterError) {
                return .success(try parse(reply))
            } catch {
                return .failure(error)
            }
        }
    }

    private func refreshDidFinish(_ result: Result<RedisSlotMap, RedisClusterError>) {
        self.isRefreshing = false
        guard !self.isClosed else { return }
        switch result {
        case .success(let fresh):
            self.counters.topologyRefreshed()
            if self.hasMap && fresh.primaries != self.map.primaries {
                self.counters.failoverSeen()
                if self.configuration.logsConnectionEvents {
                    Log.info(
                        "redis_cluster_topology_changed",
                        [
                            ("connection", self.label),
                            ("primaries", fresh.primaries.map(\.description).joined(separator: ",")),
                            ("unassigned_slots", String(fresh.unassignedSlotCount)),
                        ])
                }
            }
            self.map = fresh
            self.hasMap = true
            // Connections to nodes that no longer serve slots (and seeds that are replicas) go.
            for (node, connection) in self.nodes where !fresh.primaries.contains(node) {
                self.nodes[node] = nil
                connection.close()
            }
            for primary in fresh.primaries { _ = self.connection(for: primary) }
            self.publishSnapshots()
            let waiting = self.awaitingMap
            self.awaitingMap = []
            for command in waiting { command.resume() }
        case .failure(let error):
            self.counters.topologyRefreshFailed()
            if self.configuration.logsConnectionEvents {
                Log.warning(
                    "redis_cluster_topology_unavailable", [("connection", self.label), ("reason", error.description)])
            }
            if !self.hasMap {
                let waiting = self.awaitingMap
                self.awaitingMap = []
                for command in waiting { command.fail(error.storeError) }
            }
        }
    }

    // MARK: - Timer and close

    private func makeTimer() {
        let interval = DispatchTimeInterval.nanoseconds(Int(clamping: self.topologyRefreshInterval.nanoseconds))
        let timer = self.queue.makeTimer(leeway: .milliseconds(100)) { [weak self] in self?.startRefresh() }
        timer.schedule(deadline: .now() + interval, repeating: interval)
        self.timer = timer
    }

    package func close(completion: (@Sendable () -> Void)?) {
        self.queue.async { [self] in
            self.isClosed = true
            self.timer?.cancel()
            self.timer = nil
            let group = DispatchGroup()
            for connection in self.nodes.values {
                group.enter()
                connection.close { group.leave() }
            }
            let waiting = self.awaitingMap
            self.awaitingMap = []
            for command in waiting { command.resume() }  // isClosed: each completes with unavailable
            self.queue.notify(group) { completion?() }
        }
    }
}
