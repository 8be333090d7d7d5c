import Synchronization

/// Cluster and Sentinel events for `/metrics`, shared by every client of one store.
package final class RedisClusterCounters: Sendable {
    private let refreshes = Atomic<Int>(0)
    private let refreshFailures = Atomic<Int>(0)
    private let moved = Atomic<Int>(0)
    private let asks = Atomic<Int>(0)
    private let retries = Atomic<Int>(0)
    private let primaryChanges = Atomic<Int>(0)

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

    func topologyRefreshed() { self.refreshes.add(1, ordering: .relaxed) }
    func topologyRefreshFailed() { self.refreshFailures.add(1, ordering: .relaxed) }
    func movedRedirect() { self.moved.add(1, ordering: .relaxed) }
    func askRedirect() { self.asks.add(1, ordering: .relaxed) }
    func retriedLater() { self.retries.add(1, ordering: .relaxed) }
    func failoverSeen() { self.primaryChanges.add(1, ordering: .relaxed) }
}

extension RedisClusterCounters {
    /// Prometheus text: `attest_gateway_redis_topology_refreshes_total{result="ok|failed"}`,
    /// `attest_gateway_redis_redirects_total{kind="moved|ask|retry"}` and
    /// `attest_gateway_redis_primary_changes_total` (cluster primaries set changed, or Sentinel
    /// named a new primary: a failover).
    package var metricsText: String {
        var out = "# HELP attest_gateway_redis_topology_refreshes_total Cluster slot map / Sentinel primary queries.\n"
        out += "# TYPE attest_gateway_redis_topology_refreshes_total counter\n"
        out += "attest_gateway_redis_topology_refreshes_total{result=\"ok\"} \(self.topologyRefreshes)\n"
        out += "attest_gateway_redis_topology_refreshes_total{result=\"failed\"} \(self.topologyRefreshFailures)\n"
        out += "# HELP attest_gateway_redis_redirects_total Cluster redirects and retries followed.\n"
        out += "# TYPE attest_gateway_redis_redirects_total counter\n"
        out += "attest_gateway_redis_redirects_total{kind=\"moved\"} \(self.movedRedirects)\n"
        out += "attest_gateway_redis_redirects_total{kind=\"ask\"} \(self.askRedirects)\n"
        out += "attest_gateway_redis_redirects_total{kind=\"retry\"} \(self.retriesLater)\n"
        out += "# HELP attest_gateway_redis_primary_changes_total Primaries changed (failovers, resharding).\n"
        out += "# TYPE attest_gateway_redis_primary_changes_total counter\n"
        out += "attest_gateway_redis_primary_changes_total \(self.failovers)\n"
        return out
    }
}
