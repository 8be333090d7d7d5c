package import GatewayIO
package import RedisClient
import Synchronization

/// Exports the serving store's health (`StoreHealthReporting`) through the metrics registry,
/// read when `/metrics` is scraped:
///
/// - `attest_gateway_store_ready`: 1 when the store is ready (always 1 for a store without
///   connections);
/// - Redis only: `attest_gateway_store_connections_ready`,
///   `attest_gateway_store_command_timeouts_total`, `attest_gateway_store_connect_attempts_total`,
///   `attest_gateway_redis_topology_refreshes_total{result}`, `attest_gateway_redis_redirects_total{kind}`
///   and `attest_gateway_redis_primary_changes_total`.
///
/// Families the store has nothing for are left out of the exposition. The registry keeps the
/// first family registered under a name, so one `StoreHealthMetrics` exports per registry
/// (`serve` has one). Any queue.
package final class StoreHealthMetrics: Sendable {
    private let store = Mutex<(any StoreHealthReporting)?>(nil)

    package init() {}

    /// Registers the families in `registry` (again: a no-op) and reads `store` from now on: a
    /// reload that builds a new store calls this with it.
    package func export(_ store: any StoreHealthReporting, through registry: MetricsRegistry) {
        self.store.withLock { $0 = store }
        self.register(in: registry)
    }

    /// The text of `store`'s families alone, as a scrape shows them.
    package static func text(of store: any StoreHealthReporting) -> String {
        let registry = MetricsRegistry()
        StoreHealthMetrics().export(store, through: registry)
        return registry.render()
    }

    private var health: StoreHealth? { self.store.withLock { $0 }?.storeHealth }

    private func register(in registry: MetricsRegistry) {
        typealias Sample = ScrapedFamily.Sample
        _ = registry.scraped(
            "attest_gateway_store_ready", help: "1 when the store is connected and ready.", kind: .gauge
        ) { [self] in
            self.health.map { [Sample(value: $0.isReady ? 1 : 0)] } ?? []
        }
        _ = registry.scraped(
            "attest_gateway_store_connections_ready",
            help: "Redis connections ready (one per event loop, plus one).", kind: .gauge
        ) { [self] in
            self.health?.connections.map { [Sample(value: $0.ready)] } ?? []
        }
        _ = registry.scraped(
            "attest_gateway_store_command_timeouts_total", help: "Store commands that timed out.", kind: .counter
        ) { [self] in
            self.health?.connections.map { [Sample(value: $0.commandTimeouts)] } ?? []
        }
        _ = registry.scraped(
            "attest_gateway_store_connect_attempts_total", help: "Connection attempts to Redis.", kind: .counter
        ) { [self] in
            self.health?.connections.map { [Sample(value: $0.connectAttempts)] } ?? []
        }
        _ = registry.scraped(
            "attest_gateway_redis_topology_refreshes_total",
            help: "Cluster slot map / Sentinel primary queries.", kind: .counter
        ) { [self] in
            guard let events = self.health?.topology else { return [] }
            return [
                Sample([("result", "ok")], value: events.refreshes),
                Sample([("result", "failed")], value: events.refreshFailures),
            ]
        }
        _ = registry.scraped(
            "attest_gateway_redis_redirects_total", help: "Cluster redirects and retries followed.", kind: .counter
        ) { [self] in
            guard let events = self.health?.topology else { return [] }
            return [
                Sample([("kind", "moved")], value: events.movedRedirects),
                Sample([("kind", "ask")], value: events.askRedirects),
                Sample([("kind", "retry")], value: events.retriesLater),
            ]
        }
        _ = registry.scraped(
            "attest_gateway_redis_primary_changes_total",
            help: "Primaries changed (failovers, resharding).", kind: .counter
        ) { [self] in
            self.health?.topology.map { [Sample(value: $0.primaryChanges)] } ?? []
        }
    }
}
