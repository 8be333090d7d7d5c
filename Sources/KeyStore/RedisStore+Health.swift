import Glibc
package import RedisClient

extension RedisStore {
    /// Read from every connection's counters and the shared cluster counters, no round trip.
    package var storeHealth: StoreHealth {
        let counters = self.connections.map(\.counters)
        return StoreHealth(
            isReady: self.isReady,
            connections: StoreHealth.Connections(
                ready: counters.count { $0.isReady },
                commandTimeouts: counters.reduce(0) { $0 + $1.commandTimeouts },
                connectAttempts: counters.reduce(0) { $0 + $1.connectAttempts }
            ),
            topology: self.clusterCounters.events
        )
    }
}

extension RedisStore {
    /// Waits (blocking, at most `timeout`) until every connection is ready or has failed a
    /// first attempt, and returns the first failure that retrying cannot mend (TLS
    /// verification, wrong password: `RedisConnectFailure.isConfiguration`), else nil. An
    /// outage (refused, unreachable) is not such a failure: the store keeps reconnecting.
    /// For start-up and reload, off the event loops.
    ///
    /// Sentinel mode: the connections to the sentinels count too. A data connection learns
    /// of a sentinel's refusal only on a later attempt (its first question may go out before
    /// that sentinel's TLS handshake has failed), so the sentinels' own connections are read.
    package func firstConfigurationFailure(timeout: Duration) -> RedisConnectFailure? {
        let deadline = ContinuousClock.now + timeout
        while true {
            let connections = self.connections
            let sentinels = self.sentinelConnections
            let failures =
                connections.compactMap(\.counters.lastFailure)
                + sentinels.compactMap {
                    $0.counters.lastFailure.map {
                        RedisConnectFailure(reason: "sentinel \($0.reason)", isConfiguration: $0.isConfiguration)
                    }
                }
            if let refused = failures.first(where: \.isConfiguration) { return refused }
            let settled = (connections + sentinels).allSatisfy {
                $0.counters.isReady || $0.counters.lastFailure != nil
            }
            if settled || ContinuousClock.now >= deadline { return nil }
            usleep(10_000)
        }
    }
}
