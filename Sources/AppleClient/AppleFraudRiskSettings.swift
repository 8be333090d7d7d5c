/// `apple.fraud_risk:`: background refreshes of fraud-risk receipts.
public struct AppleFraudRiskSettings: Sendable, Hashable {
    /// `enabled`. Default false: receipts are stored at attestation but not refreshed.
    public var isEnabled = false
    /// `refresh_interval` and `max_backoff` (the rest keeps `FraudRiskRefreshPolicy`'s defaults).
    public var refresh = FraudRiskRefreshPolicy()
    /// `requests_per_second`: the global rate limit towards Apple, per gateway. Default 10.
    public var requestsPerSecond = 10
    /// `timeout`: one refresh call (connect, TLS, answer). Default 10s.
    public var timeout: Duration = .seconds(10)
    /// `sweep_interval`: how often `serve` runs a refresher pass over the due set. Default 5s.
    public var sweepInterval: Duration = .seconds(5)

    /// Bounds of `refresh_interval`: Apple asks for at most one refresh a day per key.
    public static let refreshIntervalRange = Duration.seconds(86_400)...Duration.seconds(30 * 86_400)
    /// Bounds of `max_backoff`.
    public static let maximumBackoffRange = Duration.seconds(86_400)...Duration.seconds(90 * 86_400)

    /// Bounds of `sweep_interval`.
    public static let sweepIntervalRange = Duration.milliseconds(100)...Duration.seconds(3600)

    public init() {}
}
