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
