/// How often and how patiently `FraudRiskRefresh` asks Apple for a new receipt. Defaults
/// follow Apple's guidance (docs/apple-services.md): at most one refresh a day per key.
public struct FraudRiskRefreshPolicy: Sendable, Hashable {
    /// Time between successful refreshes of one key (`apple.fraud_risk.refresh_interval`).
    /// Default 24h; never less than the receipt's own not-before (field 19).
    public var refreshInterval: Duration = .seconds(86_400)
    /// After a 304 (too early): wait this long before asking again, doubling on repeated
    /// 304s up to `refreshInterval`. Default 6h.
    public var notModifiedRetry: Duration = .seconds(6 * 3600)
    /// After a 429, 5xx, a malformed answer or no answer: first backoff, doubled per
    /// consecutive failure up to `transientMaximumBackoff`, with jitter. Default 1 minute.
    public var transientInitialBackoff: Duration = .seconds(60)
    /// Default 6h.
    public var transientMaximumBackoff: Duration = .seconds(6 * 3600)
    /// After a 404 (no data; receipts can come back to life months later), a 400 or a
    /// receipt that fails verification: first backoff, doubled per consecutive failure up to
    /// `maximumBackoff`. Never gives up. Default 24h.
    public var noDataInitialBackoff: Duration = .seconds(86_400)
    /// Cap of the 404 / 400 backoff (`apple.fraud_risk.max_backoff`). Default 7 days.
    public var maximumBackoff: Duration = .seconds(7 * 86_400)
    /// Share of the delay added as random spread to scheduled refreshes, so that keys
    /// attested in one burst do not all come due in the same second. Default 0.1.
    public var spread: Double = 0.1

    public init() {}
}
