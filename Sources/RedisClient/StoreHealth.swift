/// A store that reports its own health without a round trip (atomics read in place), so that
/// `/metrics` shows it at every scrape without ever waiting on the store.
///
/// `StoreHealthMetrics` reads it when `/metrics` is scraped. Every `AttestStore` adopts it:
/// `RedisStore` reports its connections and its cluster and Sentinel events; a store without
/// connections (`MemoryStore`, test doubles) is ready while it exists.
package protocol StoreHealthReporting: Sendable {
    var storeHealth: StoreHealth { get }
}

/// One reading of a store's health (see `StoreHealthReporting`).
package struct StoreHealth: Sendable, Hashable {
    /// The store's connections, summed over all of them (one per event loop, plus one).
    package struct Connections: Sendable, Hashable {
        package var ready: Int
        /// Commands completed with `StoreError.timeout` since start.
        package var commandTimeouts: Int
        /// Connection attempts since start (the first ones included).
        package var connectAttempts: Int

        package init(ready: Int, commandTimeouts: Int, connectAttempts: Int) {
            self.ready = ready
            self.commandTimeouts = commandTimeouts
            self.connectAttempts = connectAttempts
        }
    }

    /// Cluster and Sentinel events since start (`RedisClusterCounters`).
    package struct TopologyEvents: Sendable, Hashable {
        /// Topology queries (`CLUSTER SHARDS`/`SLOTS`, `SENTINEL get-master-addr-by-name`) answered.
        package var refreshes: Int
        package var refreshFailures: Int
        package var movedRedirects: Int
        package var askRedirects: Int
        /// `TRYAGAIN` / `CLUSTERDOWN` / unassigned-slot retries.
        package var retriesLater: Int
        /// A different primary seen (a slot owner changed, or Sentinel failed over).
        package var primaryChanges: Int
    }

    /// Ready to serve: for Redis, every connection connected, authenticated and its scripts
    /// loaded, and (cluster) every slot served.
    package var isReady: Bool
    /// nil for a store without connections.
    package var connections: Connections?
    /// nil for a store that is not Redis.
    package var topology: TopologyEvents?

    package init(isReady: Bool, connections: Connections? = nil, topology: TopologyEvents? = nil) {
        self.isReady = isReady
        self.connections = connections
        self.topology = topology
    }

    /// A store without connections: nothing can be down.
    package static let alwaysReady = StoreHealth(isReady: true)
}
