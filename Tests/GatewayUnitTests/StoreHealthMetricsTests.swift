import GatewayTesting
import Synchronization
import Testing

@testable import GatewayIO
@testable import GatewayServe
@testable import KeyStore
@testable import RedisClient

/// The store's families on `/metrics`: exported through the registry, read at each scrape,
/// with the names, help text and order operators' dashboards were built on.
@Suite struct StoreHealthMetricsTests {
    /// A store double whose health the test sets.
    final class FixedHealth: StoreHealthReporting {
        let health: Mutex<StoreHealth>
        init(_ health: StoreHealth) { self.health = Mutex(health) }
        var storeHealth: StoreHealth { self.health.withLock { $0 } }
    }

    static let redisHealth = StoreHealth(
        isReady: false,
        connections: StoreHealth.Connections(ready: 2, commandTimeouts: 7, connectAttempts: 4),
        topology: StoreHealth.TopologyEvents(
            refreshes: 11, refreshFailures: 1, movedRedirects: 3, askRedirects: 2, retriesLater: 5, primaryChanges: 1)
    )

    @Test func aRedisStoreShowsEveryFamilyInItsExpositionText() {
        let expected = """
            # HELP attest_gateway_store_ready 1 when the store is connected and ready.
            # TYPE attest_gateway_store_ready gauge
            attest_gateway_store_ready 0
            # HELP attest_gateway_store_connections_ready Redis connections ready (one per event loop, plus one).
            # TYPE attest_gateway_store_connections_ready gauge
            attest_gateway_store_connections_ready 2
            # HELP attest_gateway_store_command_timeouts_total Store commands that timed out.
            # TYPE attest_gateway_store_command_timeouts_total counter
            attest_gateway_store_command_timeouts_total 7
            # HELP attest_gateway_store_connect_attempts_total Connection attempts to Redis.
            # TYPE attest_gateway_store_connect_attempts_total counter
            attest_gateway_store_connect_attempts_total 4
            # HELP attest_gateway_redis_topology_refreshes_total Cluster slot map / Sentinel primary queries.
            # TYPE attest_gateway_redis_topology_refreshes_total counter
            attest_gateway_redis_topology_refreshes_total{result="ok"} 11
            attest_gateway_redis_topology_refreshes_total{result="failed"} 1
            # HELP attest_gateway_redis_redirects_total Cluster redirects and retries followed.
            # TYPE attest_gateway_redis_redirects_total counter
            attest_gateway_redis_redirects_total{kind="moved"} 3
            attest_gateway_redis_redirects_total{kind="ask"} 2
            attest_gateway_redis_redirects_total{kind="retry"} 5
            # HELP attest_gateway_redis_primary_changes_total Primaries changed (failovers, resharding).
            # TYPE attest_gateway_redis_primary_changes_total counter
            attest_gateway_redis_primary_changes_total 1

            """
        #expect(StoreHealthMetrics.text(of: FixedHealth(Self.redisHealth)) == expected)
    }

    @Test func aStoreWithoutConnectionsIsOnlyReady() {
        let expected = """
            # HELP attest_gateway_store_ready 1 when the store is connected and ready.
            # TYPE attest_gateway_store_ready gauge
            attest_gateway_store_ready 1

            """
        #expect(StoreHealthMetrics.text(of: MemoryStore()) == expected)
        #expect(EnforcementGateFactory.storeMetricsText(MemoryStore()) == expected)
    }

    @Test func valuesAreReadAtEachScrapeAndFollowTheExportedStore() {
        let registry = MetricsRegistry()
        let exporter = StoreHealthMetrics()
        #expect(!registry.render().contains("attest_gateway_store"), "nothing before a store is exported")
        let store = FixedHealth(Self.redisHealth)
        exporter.export(store, through: registry)
        #expect(registry.render().contains("attest_gateway_store_ready 0\n"))
        store.health.withLock { $0.isReady = true }
        #expect(registry.render().contains("attest_gateway_store_ready 1\n"))
        // A reload onto a memory store: the Redis families leave the exposition.
        exporter.export(MemoryStore(), through: registry)
        let text = registry.render()
        #expect(text.contains("attest_gateway_store_ready 1\n"))
        #expect(!text.contains("attest_gateway_store_connections_ready"))
        #expect(!text.contains("attest_gateway_redis_"))
    }
}
