import GatewayIO
package import GoogleClient
import KeyStore
package import OutboundHTTP
import RedisClient

/// What `serve` runs for `android.revocation`: the list enrollments read
/// (`AndroidRevocationCurrent`), the fetcher that keeps it current and, for a URL, Google's
/// client on the gateway's loops. With a Redis store (one node or sentinel) the fleet shares
/// one copy in one key (`AndroidRevocationRedisShare`, over the store's shared connection); a
/// cluster store or a memory store fetches for itself. `EnforcementGateFactory` keeps one
/// across reloads while the settings and the store are unchanged (a reload then re-reads a
/// file source), and replaces it otherwise, stopping the old fetcher.
package final class AndroidRevocationService: Sendable {
    package let settings: AndroidRevocationSettings
    package let current: AndroidRevocationCurrent
    package let client: OutboundHTTPClient?
    package let fetcher: AndroidRevocationFetcher
    /// Whether the fleet's copy in Redis is read and written.
    package let isShared: Bool
    /// The store the share works on (identity compared across reloads).
    let storeIdentity: ObjectIdentifier

    /// Builds the client (reads `ca_file`: a file broken since the load fails the start or the
    /// reload) and the fetcher, not started.
    init(
        settings: AndroidRevocationSettings, store: any AttestStore, loops: [EventLoop], registry: MetricsRegistry,
        metrics: AndroidRevocationMetrics
    ) throws(OutboundHTTPError) {
        self.settings = settings
        self.storeIdentity = ObjectIdentifier(store)
        self.current = AndroidRevocationCurrent(settings: settings, metrics: metrics)
        var share: (any AndroidRevocationShare)?
        switch settings.source {
        case .url:
            self.client = try GoogleClientFactory.make(loops: loops, caFile: settings.caFile, registry: registry)
            if let redis = store as? RedisStore {
                if case .cluster = redis.url.topology {
                    Log.warning(
                        "android_revocation_not_shared",
                        [("reason", "a Redis cluster store: each gateway fetches the list itself")])
                } else {
                    share = AndroidRevocationRedisShare(connection: redis.connection)
                }
            }
        case .file:
            self.client = nil
        }
        self.isShared = share != nil
        self.fetcher = AndroidRevocationFetcher(
            settings: settings, current: self.current, client: self.client, share: share, metrics: metrics)
    }

    func start() {
        self.fetcher.start()
        let source: String
        switch self.settings.source {
        case .url(let endpoint): source = endpoint.description
        case .file(let path): source = "file:" + path
        }
        Log.info(
            "android_revocation_started",
            [
                ("source", source), ("refresh_s", String(self.settings.refresh.components.seconds)),
                ("max_age_s", String(self.settings.maximumAge.components.seconds)),
                ("on_stale", self.settings.onStale.rawValue), ("shared", self.isShared ? "redis" : "no"),
            ])
    }

    /// Stops the fetcher and closes the connections to Google.
    package func shutdown() {
        self.fetcher.stop()
        self.client?.shutdown()
    }
}
