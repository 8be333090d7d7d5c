package import GatewayIO

/// How a `RedisConnection` behaves. Every limit has a default that suits one gateway
/// process talking to a Redis on the same network.
package struct RedisConfiguration: Sendable, Hashable {
    /// Time a caller waits for a reply before it completes with `StoreError.timeout`.
    /// Default 250 ms. The late reply, if it ever comes, is dropped (see `RedisConnection`).
    package var commandTimeout: Duration
    /// Time allowed for the TCP (or Unix socket) connect plus AUTH/SELECT/SCRIPT LOAD.
    /// Default 1 s.
    package var connectTimeout: Duration
    /// Commands sent and not yet answered (timed-out ones included, until their late reply
    /// arrives). Beyond it new commands fail at once with `StoreError.overloaded`. Default 4096.
    package var maxPendingCommands: Int
    /// First delay before reconnecting after a failed attempt. Default 50 ms.
    package var reconnectBackoffInitial: Duration
    /// Cap of the exponential reconnect delay. Default 2 s.
    package var reconnectBackoffMaximum: Duration
    /// When the oldest unanswered command has been waiting this long, the connection is
    /// considered dead (a half-open TCP connection never errors by itself) and is reset.
    /// Default 2 s; always at least `commandTimeout`.
    package var staleConnectionTimeout: Duration
    /// Log connection events (connected, lost, unavailable) as JSON lines on stderr.
    /// Default true; the `keys` CLI turns it off (its errors say the same once).
    package var logsConnectionEvents: Bool
    /// `key_idle_ttl`: a key record unused (no counter advance) this long expires; every
    /// advance renews it in the same script. nil (default): records never expire. Revoked
    /// records never expire.
    package var keyIdleTTL: Duration?
    /// `counter_durability: replica`: after every counter advance, `WAIT 1 <ms>`; the advance
    /// counts only when at least one replica acknowledged it within this time, else the call
    /// fails closed (`StoreError.unavailable`). nil (default, `counter_durability: primary`):
    /// no WAIT. See docs/operations.md for the window of exposure without it.
    package var replicaAcknowledgementTimeout: Duration?

    package init(
        commandTimeout: Duration = .milliseconds(250),
        connectTimeout: Duration = .seconds(1),
        maxPendingCommands: Int = 4096,
        reconnectBackoffInitial: Duration = .milliseconds(50),
        reconnectBackoffMaximum: Duration = .seconds(2),
        staleConnectionTimeout: Duration = .seconds(2),
        logsConnectionEvents: Bool = true,
        keyIdleTTL: Duration? = nil,
        replicaAcknowledgementTimeout: Duration? = nil
    ) {
        self.keyIdleTTL = keyIdleTTL
        self.replicaAcknowledgementTimeout = replicaAcknowledgementTimeout
        self.commandTimeout = commandTimeout
        self.connectTimeout = connectTimeout
        self.maxPendingCommands = maxPendingCommands
        self.reconnectBackoffInitial = reconnectBackoffInitial
        self.reconnectBackoffMaximum = reconnectBackoffMaximum
        self.staleConnectionTimeout = staleConnectionTimeout
        self.logsConnectionEvents = logsConnectionEvents
    }
}

extension HostResolver {
    /// Looks up the host names of Redis nodes, sentinels included (one lookup at a time, off
    /// every connection's queue).
    package static let redis = HostResolver(label: "attest-gateway.redis.resolver")
}
