package import GateContract
package import KeyStore
package import RedisClient

/// What the enforcement gate reports for `/metrics`. Called from any queue, on the request
/// path: implementations must be cheap and thread-safe (atomics or per-shard counters).
///
/// `GatewayGateMetrics` records into the process's metrics registry; tests record into
/// memory to assert on counts.
package protocol GateMetrics: Sendable {
    /// One request decided by the gate: its route name (`-` when none) and verdict.
    func requestDecided(route: String, verdict: AttestVerdict)
    /// The same, for the route at `routeIndex` of the policy the metrics were made for (the
    /// passthrough path: no lookup by name).
    func requestDecided(routeIndex: Int, route: String, verdict: AttestVerdict)
    /// One call of the attest endpoint: `verified` or the failure code (`nonce_mismatch`, ...).
    func attestation(result: String)
    /// One challenge issued by the challenge endpoint.
    func challengeIssued()
    /// Wall time of one protected request's verification (assertion + store round trips).
    func verificationLatency(seconds: Double)
    /// One failed store call (`operation`: put_challenge, consume_challenge, create_key,
    /// fetch_key, advance_counter, ping).
    func storeError(operation: String, kind: StoreError.Kind)
    /// One request refused by a per-address limit (`challenge_rate`, `body_bytes_per_address`).
    func limitRefused(limit: String)
    /// One request refused by a route's per-device-key limit (`rate`, `daily_quota`): by route
    /// and limit, never by key.
    func keyLimitRefused(route: String, limit: KeyLimitKind)
    /// The fleet's attestations of `appID` in the current minute, as the store counted them
    /// after this gateway's latest one, and whether that is above `attestation_rate_alert`.
    func fleetAttestations(appID: String, perMinute: Int, alerting: Bool)
    /// One failure an app reported about itself: `ios`/`android` and an allowlisted code or `other`.
    func clientReportedFailure(platform: String, code: String)
    /// One verified enrollment (`enrollment`) or protected request (`request`) of a key of
    /// `platform` (`ios`, `android`).
    func platformVerified(platform: String, kind: String)
    /// One cryptographically valid assertion's launch validation (before policy): category
    /// value and bundle version, nil when the device wrote none.
    func launchValidation(category: UInt32?, bundleVersion: String?)
    /// One request on an enforce route with `enforce_percent` < 100: its arm and verdict.
    func rolloutDecided(route: String, arm: RolloutArm, verdict: AttestVerdict)
    /// The receipt of one verified attestation: `verified` or the verification code.
    func attestReceipt(outcome: String)
    /// A protected request whose key's risk metric is above the route's `max_risk_metric`
    /// (`action`: flag or deny), or whose metric is unknown while the route has a rule.
    func riskMetricJudged(route: String, outcome: String)
    /// One DeviceCheck fallback decision: an exchange (`issued` or its error code) or a
    /// gateway token presented on a route (`accepted` or its error code).
    func deviceCheckDecided(stage: DeviceCheckStage, result: String)
}

/// Where a DeviceCheck fallback decision was made (the `stage` label).
package enum DeviceCheckStage: String, Sendable {
    case exchange
    case token
}

extension GateMetrics {
    package func launchValidation(category: UInt32?, bundleVersion: String?) {}
    package func rolloutDecided(route: String, arm: RolloutArm, verdict: AttestVerdict) {}
    package func deviceCheckDecided(stage: DeviceCheckStage, result: String) {}
    package func attestReceipt(outcome: String) {}
    package func riskMetricJudged(route: String, outcome: String) {}
    package func keyLimitRefused(route: String, limit: KeyLimitKind) {}
    package func fleetAttestations(appID: String, perMinute: Int, alerting: Bool) {}
    package func clientReportedFailure(platform: String, code: String) {}
    package func platformVerified(platform: String, kind: String) {}
}

extension GateMetrics {
    package func requestDecided(routeIndex: Int, route: String, verdict: AttestVerdict) {
        self.requestDecided(route: route, verdict: verdict)
    }
}

/// Metrics that go nowhere (tools, tests that do not look at metrics).
package struct NoGateMetrics: GateMetrics {
    package init() {}
    package func requestDecided(route: String, verdict: AttestVerdict) {}
    package func attestation(result: String) {}
    package func challengeIssued() {}
    package func verificationLatency(seconds: Double) {}
    package func storeError(operation: String, kind: StoreError.Kind) {}
    package func limitRefused(limit: String) {}
}
