package import GateContract
package import GatewayIO
package import KeyStore
import PolicyModel
package import RedisClient
import Synchronization
import Verification

/// `GateMetrics` recorded in the process's `MetricsRegistry` (rendered at `/metrics`):
///
/// - `attest_gateway_verdicts_total{route, verdict}`: requests decided by the gate.
/// - `attest_gateway_attestations_total{result}`: attest endpoint calls, `verified` or the
///   failure code.
/// - `attest_gateway_challenges_issued_total`
/// - `attest_gateway_verification_duration_seconds`: protected requests, assertion check
///   plus store round trips.
/// - `attest_gateway_store_errors_total{operation, kind}`
/// - `attest_gateway_launch_validation_total{category}`: valid assertions by launch
///   validation category name (`none` when the device wrote none; unnamed values `other`).
/// - `attest_gateway_bundle_versions_total{version}`: valid assertions by bundle version, the
///   first `bundleVersionLabelLimit` distinct versions this process saw by name, the rest
///   `other`, none `none` (bounded; see docs/operations.md).
/// - `attest_gateway_key_limit_refusals_total{route, limit}`: requests refused by a route's
///   `key_limits` (`rate`, `daily_quota`); route names come from the policy, so the labels are bounded.
/// - `attest_gateway_fleet_attestations_per_minute{app_id}`, `attest_gateway_fleet_attestation_alert{app_id}`:
///   the fleet's attestations per App ID per minute and the `attestation_rate_alert` flag (App
///   IDs come from the policy: bounded).
/// - `attest_gateway_client_reported_failures_total{platform, code}`: apps' own failure reports
///   (`ClientReportEndpoint`), allowlisted labels only.
/// - `attest_gateway_rollout_verdicts_total{route, arm, verdict}`: requests on enforce routes
///   with `enforce_percent` < 100, by rollout arm.
///
/// Counters for the policy's routes are resolved once at init (immutable table, no lock
/// on the hot path); other labels go through the registry's locked lookup.
package final class GatewayGateMetrics: GateMetrics {
    private let verdicts: CounterFamily
    private let attestations: CounterFamily
    private let challenges: Counter
    private let latency: Histogram
    private let storeErrors: CounterFamily
    private let limitRefusals: CounterFamily
    private let keyLimitRefusals: CounterFamily
    private let fleetAttestationRate: GaugeFamily
    private let fleetAttestationAlert: GaugeFamily
    /// "platform|code" → counter, for every allowlisted pair (resolved once: bounded).
    private let clientReports: [String: Counter]
    /// "platform|kind" → counter, for the four allowed pairs.
    private let platformVerifications: [String: Counter]
    /// route name → one counter per `AttestVerdict.gateVerdicts` index.
    private let routeHandles: [String: [Counter]]
    /// The same counters by the policy's route index (`routeNames`' order).
    private let routeHandlesByIndex: [[Counter]]
    /// Category value → counter for every named category, resolved once (no lock per request).
    private let categoryHandles: [UInt32: Counter]
    private let categoryOther: Counter
    private let categoryNone: Counter
    /// Bundle versions with a label of their own (at most `bundleVersionLabelLimit`), then `other`.
    private let versionHandles: BoundedLabels
    private let versionNone: Counter
    private let rollout: CounterFamily
    private let deviceCheck: CounterFamily
    private let attestReceipts: CounterFamily
    private let riskJudgements: CounterFamily

    /// Distinct bundle versions labelled by name before the rest go to `other`.
    package static let bundleVersionLabelLimit = 20

    /// Buckets from 50 µs (a cached ECDSA verify) to 1 s (store timeouts).
    package static let latencyBuckets: [Double] = [
        0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
    ]

    /// - Parameter routeNames: the policy's route names (the gate's own labels are added).
    package init(registry: MetricsRegistry, routeNames: [String]) {
        let verdicts = registry.counter(
            "attest_gateway_verdicts_total",
            help: "Requests decided by the App Attest gate, by route and verdict.",
            labelNames: ["route", "verdict"]
        )
        self.verdicts = verdicts
        self.attestations = registry.counter(
            "attest_gateway_attestations_total",
            help: "Attest endpoint calls, by result (verified or failure code).",
            labelNames: ["result"]
        )
        self.challenges = registry.counter(
            "attest_gateway_challenges_issued_total",
            help: "Challenges issued by the challenge endpoint."
        ).labels()
        self.latency = registry.histogram(
            "attest_gateway_verification_duration_seconds",
            help: "Time to verify a protected request (assertion and store round trips).",
            buckets: Self.latencyBuckets
        ).labels()
        self.storeErrors = registry.counter(
            "attest_gateway_store_errors_total",
            help: "Failed store calls, by operation and kind.",
            labelNames: ["operation", "kind"]
        )
        self.limitRefusals = registry.counter(
            "attest_gateway_limit_refusals_total",
            help: "Requests refused by a per-client-address limit, by limit (never by address).",
            labelNames: ["limit"]
        )
        self.keyLimitRefusals = registry.counter(
            "attest_gateway_key_limit_refusals_total",
            help: "Requests refused by a route's per-device-key limit, by route and limit (never by key).",
            labelNames: ["route", "limit"]
        )
        self.fleetAttestationRate = registry.gauge(
            "attest_gateway_fleet_attestations_per_minute",
            help: "Attestations of the App ID in the current minute across the fleet, as of this gateway's latest.",
            labelNames: ["app_id"]
        )
        self.fleetAttestationAlert = registry.gauge(
            "attest_gateway_fleet_attestation_alert",
            help: "1 while the App ID's fleet-wide attestations per minute are above attestation_rate_alert.",
            labelNames: ["app_id"]
        )
        let reports = registry.counter(
            "attest_gateway_client_reported_failures_total",
            help: "Attestation failures apps reported about themselves, by platform and allowlisted code (else other).",
            labelNames: ["platform", "code"]
        )
        var reportHandles: [String: Counter] = [:]
        for platform in ClientFailureReport.Platform.allCases {
            for code in ClientFailureReport.labels(for: platform) {
                reportHandles["\(platform.rawValue)|\(code)"] = reports.labels(platform.rawValue, code)
            }
        }
        self.clientReports = reportHandles
        let platforms = registry.counter(
            "attest_gateway_platform_verified_total",
            help: "Verified enrollments and protected requests, by the key's platform (ios, android).",
            labelNames: ["platform", "kind"]
        )
        var platformHandles: [String: Counter] = [:]
        for platform in ["ios", "android"] {
            for kind in ["enrollment", "request"] {
                platformHandles["\(platform)|\(kind)"] = platforms.labels(platform, kind)
            }
        }
        self.platformVerifications = platformHandles
        let categories = registry.counter(
            "attest_gateway_launch_validation_total",
            help: "Valid assertions by launch validation category (none: iOS 26 or earlier).",
            labelNames: ["category"]
        )
        var categoryHandles: [UInt32: Counter] = [:]
        for entry in LaunchValidationCategory.names {
            categoryHandles[entry.value] = categories.labels(entry.name)
        }
        self.categoryHandles = categoryHandles
        self.categoryOther = categories.labels("other")
        self.categoryNone = categories.labels("none")
        let bundleVersions = registry.counter(
            "attest_gateway_bundle_versions_total",
            help:
                "Valid assertions by bundle version (first \(Self.bundleVersionLabelLimit) versions seen, then other).",
            labelNames: ["version"]
        )
        self.versionHandles = BoundedLabels(family: bundleVersions, limit: Self.bundleVersionLabelLimit)
        self.versionNone = bundleVersions.labels("none")
        self.rollout = registry.counter(
            "attest_gateway_rollout_verdicts_total",
            help: "Requests on enforce routes in gradual rollout, by arm and verdict.",
            labelNames: ["route", "arm", "verdict"]
        )
        self.attestReceipts = registry.counter(
            "attest_gateway_attest_receipts_total",
            help: "Receipts of verified attestations, by outcome (verified or the verification code).",
            labelNames: ["outcome"]
        )
        self.riskJudgements = registry.counter(
            "attest_gateway_risk_metric_checks_total",
            help: "Verified requests on routes with max_risk_metric, by route and outcome (pass, flag, deny, unknown).",
            labelNames: ["route", "outcome"]
        )
        self.deviceCheck = registry.counter(
            "attest_gateway_devicecheck_total",
            help: "DeviceCheck fallback decisions: exchanges and gateway-token checks, by stage and result.",
            labelNames: ["stage", "result"]
        )
        var handles: [String: [Counter]] = [:]
        let labels =
            routeNames + [
                AttestGate.RouteLabel.challenge, AttestGate.RouteLabel.attest, AttestGate.RouteLabel.deviceCheck,
                AttestGate.RouteLabel.none,
            ]
        for route in labels where handles[route] == nil {
            handles[route] = AttestVerdict.gateVerdicts.map { verdicts.labels(route, $0.rawValue) }
        }
        self.routeHandles = handles
        self.routeHandlesByIndex = routeNames.map { handles[$0] ?? [] }
    }

    package func attestReceipt(outcome: String) { self.attestReceipts.labels(outcome).increment() }

    package func riskMetricJudged(route: String, outcome: String) {
        self.riskJudgements.labels(route, outcome).increment()
    }

    package func requestDecided(routeIndex: Int, route: String, verdict: AttestVerdict) {
        if routeIndex >= 0, routeIndex < self.routeHandlesByIndex.count,
            let index = AttestVerdict.gateVerdicts.firstIndex(of: verdict),
            index < self.routeHandlesByIndex[routeIndex].count
        {
            self.routeHandlesByIndex[routeIndex][index].increment()
        } else {
            self.requestDecided(route: route, verdict: verdict)
        }
    }

    package func requestDecided(route: String, verdict: AttestVerdict) {
        if let counters = self.routeHandles[route], let index = AttestVerdict.gateVerdicts.firstIndex(of: verdict) {
            counters[index].increment()
        } else {
            self.verdicts.labels(route, verdict.rawValue).increment()
        }
    }

    package func attestation(result: String) {
        self.attestations.labels(result).increment()
    }

    package func deviceCheckDecided(stage: DeviceCheckStage, result: String) {
        self.deviceCheck.labels(stage.rawValue, result).increment()
    }

    package func challengeIssued() {
        self.challenges.increment()
    }

    package func verificationLatency(seconds: Double) {
        self.latency.observe(seconds: seconds)
    }

    package func storeError(operation: String, kind: StoreError.Kind) {
        self.storeErrors.labels(operation, kind.rawValue).increment()
    }

    package func limitRefused(limit: String) {
        self.limitRefusals.labels(limit).increment()
    }

    package func keyLimitRefused(route: String, limit: KeyLimitKind) {
        self.keyLimitRefusals.labels(route, limit.rawValue).increment()
    }

    package func clientReportedFailure(platform: String, code: String) {
        // Only allowlisted pairs have a series: anything else cannot add one.
        self.clientReports["\(platform)|\(code)"]?.increment()
    }

    package func platformVerified(platform: String, kind: String) {
        self.platformVerifications["\(platform)|\(kind)"]?.increment()
    }

    package func fleetAttestations(appID: String, perMinute: Int, alerting: Bool) {
        self.fleetAttestationRate.labels(appID).set(Int64(perMinute))
        self.fleetAttestationAlert.labels(appID).set(alerting ? 1 : 0)
    }

    package func launchValidation(category: UInt32?, bundleVersion: String?) {
        if let category {
            (self.categoryHandles[category] ?? self.categoryOther).increment()
        } else {
            self.categoryNone.increment()
        }
        if let bundleVersion {
            self.versionHandles.counter(for: bundleVersion).increment()
        } else {
            self.versionNone.increment()
        }
    }

    package func rolloutDecided(route: String, arm: RolloutArm, verdict: AttestVerdict) {
        self.rollout.labels(route, arm.rawValue, verdict.rawValue).increment()
    }
}

/// The counters of one single-label family for at most `limit` distinct values; every later
/// value counts as `other`. Thread-safe (one lock, no registry lookup per call).
package final class BoundedLabels: Sendable {
    private let family: CounterFamily
    private let limit: Int
    private let other: Counter
    private let counters = Mutex<[String: Counter]>([:])

    package init(family: CounterFamily, limit: Int) {
        self.family = family
        self.limit = limit
        self.other = family.labels("other")
    }

    package func counter(for value: String) -> Counter {
        if let known = self.counters.withLock({ $0[value] }) { return known }
        return self.counters.withLock { counters in
            if let known = counters[value] { return known }
            guard counters.count < self.limit else { return self.other }
            let counter = self.family.labels(value)
            counters[value] = counter
            return counter
        }
    }
}
