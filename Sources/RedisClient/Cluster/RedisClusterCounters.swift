import Synchronization

/// Cluster and Sentinel events for `/metrics`, shared by every client of one store.
package final class RedisClusterCounters: Sendable {
    private let refreshes = Atomic<Int>(0)
    private let refreshFailures = Atomic<Int>(0)
    private let moved = Atomic<Int>(0)
    private let asks = Atomic<Int>(0)
    private let retries = Atomic<Int>(0)
    private let primaryChanges = Atomic<Int>(0)
    private let switchMasters = Atomic<Int>(0)
    private let switchesFromMessages = Atomic<Int>(0)

    package init() {}

    /// Topology queries (`CLUSTER SHARDS`/`SLOTS`, `SENTINEL get-master-addr-by-name`) answered.
    package var topologyRefreshes: Int { self.refreshes.load(ordering: .relaxed) }
    package var topologyRefreshFailures: Int { self.refreshFailures.load(ordering: .relaxed) }
    package var movedRedirects: Int { self.moved.load(ordering: .relaxed) }
    package var askRedirects: Int { self.asks.load(ordering: .relaxed) }
    /// `TRYAGAIN` / `CLUSTERDOWN` / unassigned-slot retries.
    package var retriesLater: Int { self.retries.load(ordering: .relaxed) }
    /// A different primary seen (cluster map change of a slot's owner set, or Sentinel failover).
    package var failovers: Int { self.primaryChanges.load(ordering: .relaxed) }
    /// Sentinel `+switch-master` messages received for the store's master (every sentinel
    /// sends one per failover).
    package var switchMasterMessages: Int { self.switchMasters.load(ordering: .relaxed) }
    /// Primary changes first learnt from a `+switch-master` message (not from a poll or a
    /// reconnect's question).
    package var failoversFromSwitchMessages: Int { self.switchesFromMessages.load(ordering: .relaxed) }

    func topologyRefreshed() { self.refreshes.add(1, ordering: .relaxed) }
    func topologyRefreshFailed() { self.refreshFailures.add(1, ordering: .relaxed) }
    func movedRedirect() { self.moved.add(1, ordering: .relaxed) }
    func askRedirect() { self.asks.add(1, ordering: .relaxed) }
    func retriedLater() { self.retries.add(1, ordering: .relaxed) }
    func failoverSeen() { self.primaryChanges.add(1, ordering: .relaxed) }
    func switchMasterReceived() { self.switchMasters.add(1, ordering: .relaxed) }
    func failoverSeenFromSwitchMessage() { self.switchesFromMessages.add(1, ordering: .relaxed) }
}

extension RedisClusterCounters {
    /// The events so far, for `StoreHealth` (`/metrics`).
    package var events: StoreHealth.TopologyEvents {
        StoreHealth.TopologyEvents(
            refreshes: self.topologyRefreshes,
            refreshFailures: self.topologyRefreshFailures,
            movedRedirects: self.movedRedirects,
            askRedirects: self.askRedirects,
            retriesLater: self.retriesLater,
            primaryChanges: self.failovers
        )
    }
}
