import Dispatch
import GatewayIO
import Synchronization

/// Asks Redis Sentinels which node is the primary (`SENTINEL get-master-addr-by-name`), for
/// every `RedisConnection` of a `redis-sentinel://` store.
///
/// - Resolution: before every connect, the connection asks here; the sentinels are asked in
///   order and the first that names a primary wins. After the connect the connection checks
///   `ROLE` itself and refuses a replica (a sentinel may be behind a failover).
/// - Following a failover: a dedicated subscriber connection to each sentinel listens for
///   `+switch-master` (`SUBSCRIBE`, renewed at every reconnect); the message names the new
///   primary, and every watched connection to another node is closed and reconnects to it
///   at once. Every sentinel announces the switch, so one reachable sentinel is enough. As a
///   fallback (a subscriber that is down or half-open) the sentinels are also asked every
///   `pollInterval`, and a lost data connection asks at once.
/// - The sentinels are asked without AUTH (their own password is not supported yet); with a
///   `rediss-sentinel://` URL they are reached over TLS like the data nodes.
///
/// State is confined to `queue`.
package final class RedisSentinelResolver: @unchecked Sendable {
    let masterName: String
    private let sentinels: [RedisNodeAddress]
    private let connections: [RedisConnection]
    /// One `+switch-master` subscriber per sentinel; set once in `init`.
    private var subscribers: [RedisConnection] = []
    private let counters: RedisClusterCounters
    private let pollInterval: Duration
    private let logsEvents: Bool
    let queue: DispatchQueue

    // Confined to `queue`.
    private var current: RedisNodeAddress?
    private var watched: [Weak] = []
    private var timer: (any DispatchSourceTimer)?
    private var isPolling = false

    private struct Weak {
        weak var connection: RedisConnection?
    }

    package init(
        sentinels: [RedisNodeAddress],
        masterName: String,
        configuration: RedisConfiguration,
        counters: RedisClusterCounters,
        pollInterval: Duration = .seconds(1),
        label: String,
        tls: RedisTLS? = nil
    ) {
        self.sentinels = sentinels
        self.masterName = masterName
        self.counters = counters
        self.pollInterval = pollInterval
        self.logsEvents = configuration.logsConnectionEvents
        self.queue = DispatchQueue(label: label)
        var quiet = configuration
        quiet.logsConnectionEvents = false  // a down sentinel is reported once, by `resolve`
        self.connections = sentinels.enumerated().map { index, sentinel in
            RedisConnection(
                url: RedisURL(node: sentinel, username: nil, password: nil, usesTLS: tls != nil), configuration: quiet,
                label: "\(label).\(index)", tls: tls)
        }
        self.subscribers = sentinels.enumerated().map { index, sentinel in
            RedisConnection(
                url: RedisURL(node: sentinel, username: nil, password: nil, usesTLS: tls != nil), configuration: quiet,
                label: "\(label).\(index).events", tls: tls, subscriptions: [Self.switchMasterChannel]
            ) { [weak self] message in
                self?.switchMasterMessage(message)
            }
        }
    }

    static let switchMasterChannel = "+switch-master"

    /// A Pub/Sub message from a subscriber (on its queue):
    /// `["message", "+switch-master", "<master> <old ip> <old port> <new ip> <new port>"]`.
    private func switchMasterMessage(_ message: RedisReply) {
        guard case .array(let items) = message, items.count == 3, items[1].text == Self.switchMasterChannel,
            let payload = items[2].text
        else { return }
        self.receive(switchMasterMessage: payload)
    }

    /// The payload of a `+switch-master` message: `<master> <old ip> <old port> <new ip> <new port>`;
    /// another master's switch, or an unreadable payload, is ignored.
    func receive(switchMasterMessage payload: String) {
        let words = payload.split(separator: " ")
        guard words.count == 5, words[0] == self.masterName, let port = UInt16(words[4]), port > 0 else { return }
        let primary = RedisNodeAddress(host: String(words[3]), port: port)
        self.counters.switchMasterReceived()
        self.queue.async { [self] in self.record(primary, fromSwitchMessage: true) }
    }

    /// Connects to the sentinels and starts polling.
    package func start() {
        for connection in self.connections + self.subscribers { connection.start() }
        self.queue.async { [self] in
            let timer = DispatchSource.makeTimerSource(queue: self.queue)
            let interval = DispatchTimeInterval.nanoseconds(Int(clamping: self.pollInterval.nanoseconds))
            timer.setEventHandler { [weak self] in self?.poll() }
            timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(50))
            timer.activate()
            self.timer = timer
        }
    }

    package func close() {
        self.queue.async { [self] in
            self.timer?.cancel()
            self.timer = nil
        }
        for connection in self.connections + self.subscribers { connection.close() }
    }

    /// The connections that ask the sentinels (one per sentinel, in URL order).
    package var sentinelConnections: [RedisConnection] { self.connections }

    /// Subscriber connections that are connected and subscribed to `+switch-master`.
    var subscribedCount: Int { self.subscribers.count { $0.counters.isReady } }

    /// A sentinel connection's own refusal (an untrusted certificate), read from any thread,
    /// or nil. A data connection's first question may still be on its way when a sentinel's
    /// TLS handshake has already failed; commands that fail meanwhile say why with this.
    var refusal: RedisClusterError? {
        for (sentinel, connection) in zip(self.sentinels, self.connections) {
            if let failure = connection.counters.lastFailure, failure.isConfiguration {
                return .sentinelsRefused("sentinel \(sentinel): \(failure.reason)")
            }
        }
        return nil
    }

    /// Registers a data connection to be told when the primary changes.
    package func watch(_ connection: RedisConnection) {
        self.queue.async { [self] in self.watched.append(Weak(connection: connection)) }
    }

    /// The primary now, from the first sentinel that names one. `completion` runs on `queue`.
    func resolve(completion: @escaping @Sendable (Result<RedisNodeAddress, RedisClusterError>) -> Void) {
        self.ask(index: 0, failures: []) { [self] result in
            self.queue.async {
                if case .success(let primary) = result { self.record(primary) }
                completion(result)
            }
        }
    }

    /// Asks sentinel `index`, then the next on a failure. `refused`: an earlier sentinel
    /// refused the connection itself (its `lastFailure.isConfiguration`: TLS verification).
    private func ask(
        index: Int, failures: [String], refused: Bool = false,
        completion: @escaping @Sendable (Result<RedisNodeAddress, RedisClusterError>) -> Void
    ) {
        guard index < self.connections.count else {
            self.counters.topologyRefreshFailed()
            let reason = "no sentinel named a primary for \(self.masterName): \(failures.joined(separator: "; "))"
            // One refusal is enough: every sentinel is reached with the same `redis_tls`, so a
            // certificate one of them presents that we cannot verify is a settings mistake,
            // and the start must say so rather than serve 503s (as with a single node).
            completion(.failure(refused ? .sentinelsRefused(reason) : .noPrimary(reason)))
            return
        }
        let sentinel = self.sentinels[index]
        let connection = self.connections[index]
        let next = { @Sendable (failure: String, wasRefused: Bool) in
            self.ask(
                index: index + 1, failures: failures + ["\(sentinel): \(failure)"], refused: refused || wasRefused,
                completion: completion)
        }
        let command = [Array("SENTINEL".utf8), Array("get-master-addr-by-name".utf8), Array(self.masterName.utf8)]
        connection.send(command) { [self] result in
            switch result {
            case .success(.array(let items)) where items.count == 2:
                if let host = items[0].text, let port = items[1].integerValue, let port = UInt16(exactly: port),
                    port > 0
                {
                    self.counters.topologyRefreshed()
                    completion(.success(RedisNodeAddress(host: host, port: port)))
                    return
                }
                next("unreadable answer", false)
            case .success(.null):
                next("does not know \(self.masterName)", false)
            case .success(let reply):
                next(reply.summary, false)
            case .failure(let error):
                // A failed handshake fails the queued command first and records the attempt's
                // failure right after, in the same turn of the connection's queue: read it
                // after that turn.
                connection.queue.async {
                    next(error.reason, connection.counters.lastFailure?.isConfiguration == true)
                }
            }
        }
    }

    /// On `queue`: a primary was named; a change is a failover.
    private func record(_ primary: RedisNodeAddress, fromSwitchMessage: Bool = false) {
        guard primary != self.current else { return }
        let previous = self.current
        self.current = primary
        guard let previous else { return }
        self.counters.failoverSeen()
        if fromSwitchMessage { self.counters.failoverSeenFromSwitchMessage() }
        if self.logsEvents {
            Log.warning(
                "redis_sentinel_switch_master",
                [
                    ("master", self.masterName), ("from", previous.description), ("to", primary.description),
                    ("source", fromSwitchMessage ? "+switch-master" : "query"),
                ])
        }
        self.watched.removeAll { $0.connection == nil }
        for entry in self.watched {
            entry.connection?.primaryDidChange(to: primary)
        }
    }

    private func poll() {
        guard !self.isPolling else { return }
        self.isPolling = true
        self.resolve { [self] _ in self.isPolling = false }
    }
}
