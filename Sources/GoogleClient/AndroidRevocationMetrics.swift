import Foundation
package import GatewayIO
import Verification

/// The revocation list's metrics:
///
/// - `attest_gateway_android_revocation_fetches_total{source,outcome}`: every attempt to get
///   the list, by source (`url`, `redis`, `file`) and outcome (`ok`; url: `http_status`,
///   `unreachable`, `timeout`, `tls_failed`, `malformed`; redis: `fresh`, `old`, `missing`,
///   `error`, `malformed`; file: `unreadable`, `malformed`).
/// - `attest_gateway_android_revocation_list_age_seconds`: age of the list enrollments use,
///   read at each scrape (absent before the first list).
/// - `attest_gateway_android_revocation_list_entries`: serials on that list.
/// - `attest_gateway_android_revocation_stale_enrollments_total{action}`: enrollments that
///   found no list younger than `max_age` (`refused`, or `allowed` with `on_stale: allow`).
package struct AndroidRevocationMetrics: Sendable {
    package let fetches: CounterFamily
    package let staleEnrollments: CounterFamily

    /// - Parameter current: read at each scrape; the registry keeps the first family of a
    ///   name, so the process passes the holder it keeps across reloads.
    package init(registry: MetricsRegistry, current: @escaping @Sendable () -> AndroidRevocationCurrent?) {
        self.fetches = registry.counter(
            "attest_gateway_android_revocation_fetches_total",
            help: "Attempts to get the Android revocation status list, by source and outcome",
            labelNames: ["source", "outcome"])
        self.staleEnrollments = registry.counter(
            "attest_gateway_android_revocation_stale_enrollments_total",
            help: "Android enrollments that found no revocation list younger than max_age", labelNames: ["action"])
        _ = registry.scraped(
            "attest_gateway_android_revocation_list_age_seconds",
            help: "Age of the Android revocation status list in use", kind: .gauge
        ) {
            guard let age = current()?.age(at: Date()) else { return [] }
            return [ScrapedFamily.Sample(value: max(0, age.rounded(.down)))]
        }
        _ = registry.scraped(
            "attest_gateway_android_revocation_list_entries",
            help: "Serials on the Android revocation status list in use", kind: .gauge
        ) {
            guard let snapshot = current()?.current else { return [] }
            return [ScrapedFamily.Sample(value: snapshot.list.entries.count)]
        }
    }

    package func fetch(_ source: String, _ outcome: String) { self.fetches.labels(source, outcome).increment() }
}
