import GateContract
import GatewayIO
package import PolicyModel

/// The figures of the enforcement console (`GET /console.json`): for each route of the policy
/// in force, the verdicts of the window, what share of its monitored traffic enforcement would
/// refuse, its rollout percentage and per-key limit refusals; Redis and Apple health; keys
/// enrolled. Computed from two samples of the registry (now and the window's baseline), so
/// every figure is a difference of the counters `/metrics` shows. Pure: tested without a clock.
package struct EnforcementConsoleReport: Sendable {
    /// What the console needs to know of a route (the policy's).
    package struct Route: Sendable, Equatable {
        package var name: String
        package var mode: RoutePolicy.Mode
        package var enforcePercent: Int

        package init(name: String, mode: RoutePolicy.Mode, enforcePercent: Int) {
            self.name = name
            self.mode = mode
            self.enforcePercent = enforcePercent
        }

        package init(_ route: RoutePolicy) {
            self.init(name: route.name, mode: route.mode, enforcePercent: route.enforcePercent)
        }
    }

    /// The families the console reads (and the ring keeps).
    package enum Family {
        package static let verdicts = "attest_gateway_verdicts_total"
        package static let rolloutVerdicts = "attest_gateway_rollout_verdicts_total"
        package static let attestations = "attest_gateway_attestations_total"
        package static let storeErrors = "attest_gateway_store_errors_total"
        package static let storeReady = "attest_gateway_store_ready"
        package static let appleBreaker = "attest_gateway_apple_breaker_state"
        package static let appleRequests = "attest_gateway_apple_requests_total"
        package static let keyLimitRefusals = "attest_gateway_key_limit_refusals_total"
        package static let bundleVersions = "attest_gateway_bundle_versions_total"

        package static let all: Set<String> = [
            verdicts, rolloutVerdicts, attestations, storeErrors, storeReady, appleBreaker, appleRequests,
            keyLimitRefusals, bundleVersions,
        ]
    }

    /// Verdicts under which a request reaches the upstream on an enforced route: every other
    /// verdict on monitored traffic is a request enforcement would refuse.
    package static let admittedVerdicts: Set<String> = [
        AttestVerdict.verified.rawValue, AttestVerdict.skipped.rawValue, AttestVerdict.debug.rawValue,
        AttestVerdict.deviceCheck.rawValue,
    ]

    /// The console's columns: `verified`, `missing` (no credentials), `invalid` (credentials
    /// that do not prove a genuine app), `replayed`, `skipped` (nothing to verify), `other`
    /// (store errors, rate limits, debug and DeviceCheck admissions, …).
    package static let groups = ["verified", "missing", "invalid", "replayed", "skipped", "other"]

    package static func group(of verdict: String) -> String {
        switch AttestVerdict(rawValue: verdict) {
        case .verified: "verified"
        case .missing: "missing"
        case .counterReplay: "replayed"
        case .skipped: "skipped"
        case .malformed, .invalidSignature, .unknownKey, .revokedKey, .challengeInvalid, .appIDMismatch,
            .environmentMismatch, .launchValidationRefused, .debugTokenInvalid, .deviceCheckRefused,
            .riskMetricExceeded:
            "invalid"
        default: "other"
        }
    }

    package struct RouteFigures: Sendable, Equatable {
        package var route: Route
        /// Verdict → requests in the window (verdicts with none left out).
        package var verdicts: [String: Int]
        /// Requests judged but not enforced: every request of a `monitor` route, the monitor
        /// arm of a gradual rollout; 0 on `off` and fully enforced routes.
        package var monitored: Int
        /// Those of `monitored` whose verdict enforcement would refuse.
        package var wouldRefuse: Int
        /// Limit → per-key limit refusals in the window (empty when the family is absent).
        package var keyLimitRefusals: [String: Int]

        package var total: Int { self.verdicts.values.reduce(0, +) }
        /// `groups` → requests in the window.
        package var groups: [String: Int] {
            var groups = Dictionary(uniqueKeysWithValues: EnforcementConsoleReport.groups.map { ($0, 0) })
            for (verdict, count) in self.verdicts {
                groups[EnforcementConsoleReport.group(of: verdict), default: 0] += count
            }
            return groups
        }
        package var wouldRefuseShare: Double? {
            self.monitored == 0 ? nil : Double(self.wouldRefuse) / Double(self.monitored)
        }
    }

    package var windowSeconds: Double
    package var routes: [RouteFigures]
    /// Verdict → requests of route `-`: no route matched, or refused before routing (the
    /// parser's refusals, an ambiguous target).
    package var unrouted: [String: Int]
    /// 1 ready, 0 not, nil: the store exports no readiness.
    package var storeReady: Bool?
    package var storeErrors: Int
    /// nil without `apple:`; else 0 closed, 1 open, 2 half-open.
    package var appleBreakerState: Int?
    /// Calls to Apple that failed without an answer (`apple_*` outcomes) in the window.
    package var appleFailures: Int
    /// Attestations verified in the window: keys enrolled.
    package var keysEnrolled: Int
    /// The key-limit family is rendered by this build.
    package var keyLimitRefusalsPresent: Bool
    /// Valid assertions in the window by the app's bundle version (`none`: the device wrote none;
    /// `other`: past the first 20 versions seen): how much traffic comes from outdated clients.
    package var bundleVersions: [String: Int]

    package var monitored: Int { self.routes.reduce(0) { $0 + $1.monitored } }
    package var wouldRefuse: Int { self.routes.reduce(0) { $0 + $1.wouldRefuse } }
    /// Keys enrolled per hour over the window; nil while the window is under 10 minutes (a rate
    /// from a few minutes after start would mostly be noise).
    package var keysEnrolledPerHour: Double? {
        self.windowSeconds < 600 ? nil : Double(self.keysEnrolled) * 3600 / self.windowSeconds
    }

    package init(
        now current: ExpositionSamples, baseline: ExpositionSamples, windowSeconds: Double, routes: [Route]
    ) {
        self.windowSeconds = windowSeconds
        func delta(_ series: ExpositionSamples.Series, _ value: Double) -> Int {
            Int(max(0, value - (baseline.values[series] ?? 0)))
        }
        var verdicts: [String: [String: Int]] = [:]
        for (series, value) in current.series(Family.verdicts) {
            guard let route = series["route"], let verdict = series["verdict"] else { continue }
            let count = delta(series, value)
            if count > 0 { verdicts[route, default: [:]][verdict, default: 0] += count }
        }
        var monitorArm: [String: (all: Int, refused: Int)] = [:]
        for (series, value) in current.series(Family.rolloutVerdicts) where series["arm"] == RolloutArm.monitor.rawValue
        {
            guard let route = series["route"], let verdict = series["verdict"] else { continue }
            let count = delta(series, value)
            monitorArm[route, default: (0, 0)].all += count
            if !Self.admittedVerdicts.contains(verdict) { monitorArm[route, default: (0, 0)].refused += count }
        }
        var keyLimits: [String: [String: Int]] = [:]
        for (series, value) in current.series(Family.keyLimitRefusals) {
            guard let route = series["route"], let limit = series["limit"] else { continue }
            let count = delta(series, value)
            if count > 0 { keyLimits[route, default: [:]][limit, default: 0] += count }
        }
        self.keyLimitRefusalsPresent = current.has(Family.keyLimitRefusals)
        self.routes = routes.map { route in
            let counted = verdicts[route.name] ?? [:]
            var monitored = 0
            var wouldRefuse = 0
            switch route.mode {
            case .monitor:
                monitored = counted.values.reduce(0, +)
                wouldRefuse = counted.filter { !Self.admittedVerdicts.contains($0.key) }.values.reduce(0, +)
            case .enforce where route.enforcePercent < 100:
                monitored = monitorArm[route.name]?.all ?? 0
                wouldRefuse = monitorArm[route.name]?.refused ?? 0
            case .enforce, .off:
                break
            }
            return RouteFigures(
                route: route, verdicts: counted, monitored: monitored, wouldRefuse: wouldRefuse,
                keyLimitRefusals: keyLimits[route.name] ?? [:])
        }
        self.unrouted = verdicts["-"] ?? [:]
        var versions: [String: Int] = [:]
        for (series, value) in current.series(Family.bundleVersions) {
            guard let version = series["version"] else { continue }
            let count = delta(series, value)
            if count > 0 { versions[version, default: 0] += count }
        }
        self.bundleVersions = versions
        self.storeReady = current.series(Family.storeReady).first.map { $0.value >= 1 }
        self.storeErrors = current.series(Family.storeErrors).reduce(0) { $0 + delta($1.series, $1.value) }
        self.appleBreakerState = current.series(Family.appleBreaker).first.map { Int($0.value) }
        self.appleFailures = current.series(Family.appleRequests).reduce(0) { total, sample in
            (sample.series["outcome"] ?? "").hasPrefix("apple_") ? total + delta(sample.series, sample.value) : total
        }
        self.keysEnrolled = current.series(Family.attestations).reduce(0) { total, sample in
            sample.series["result"] == "verified" ? total + delta(sample.series, sample.value) : total
        }
    }

    /// The JSON of `GET /console.json` (keys sorted where they are data: verdicts, limits).
    package func json(generatedAt: String) -> String {
        func number(_ value: Double?) -> String {
            guard let value else { return "null" }
            return String(Double(Int(value * 10000)) / 10000)
        }
        func counts(_ values: [String: Int]) -> String {
            JSONText.object(values.keys.sorted().map { ($0, String(values[$0]!)) })
        }
        let routes = self.routes.map { figures in
            JSONText.object([
                ("name", JSONText.quote(figures.route.name)),
                ("mode", JSONText.quote(figures.route.mode.rawValue)),
                (
                    "enforce_percent",
                    figures.route.mode == .enforce ? String(figures.route.enforcePercent) : "0"
                ),
                ("requests", String(figures.total)),
                ("verdicts", counts(figures.verdicts)),
                ("groups", JSONText.object(Self.groups.map { ($0, String(figures.groups[$0] ?? 0)) })),
                ("monitored", String(figures.monitored)),
                ("would_refuse", String(figures.wouldRefuse)),
                ("would_refuse_share", number(figures.wouldRefuseShare)),
                ("key_limit_refusals", counts(figures.keyLimitRefusals)),
            ])
        }
        let breaker: String
        switch self.appleBreakerState {
        case nil: breaker = "null"
        case 0: breaker = JSONText.quote("closed")
        case 1: breaker = JSONText.quote("open")
        default: breaker = JSONText.quote("half_open")
        }
        let monitored = self.monitored
        return JSONText.object([
            ("scope", JSONText.quote("instance")),
            ("generated_at", JSONText.quote(generatedAt)),
            ("window_seconds", String(Int(self.windowSeconds))),
            ("routes", "[" + routes.joined(separator: ",") + "]"),
            (
                "unrouted",
                JSONText.object([
                    ("requests", String(self.unrouted.values.reduce(0, +))), ("verdicts", counts(self.unrouted)),
                ])
            ),
            (
                "monitored",
                JSONText.object([
                    ("requests", String(monitored)), ("would_refuse", String(self.wouldRefuse)),
                    ("share", number(monitored == 0 ? nil : Double(self.wouldRefuse) / Double(monitored))),
                ])
            ),
            (
                "redis",
                JSONText.object([
                    ("ready", self.storeReady.map { $0 ? "true" : "false" } ?? "null"),
                    ("errors", String(self.storeErrors)),
                ])
            ),
            (
                "apple",
                JSONText.object([
                    ("configured", self.appleBreakerState == nil ? "false" : "true"), ("breaker", breaker),
                    ("failures", String(self.appleFailures)),
                ])
            ),
            (
                "keys_enrolled",
                JSONText.object([
                    ("window", String(self.keysEnrolled)), ("per_hour", number(self.keysEnrolledPerHour)),
                ])
            ),
            ("key_limit_refusals_present", self.keyLimitRefusalsPresent ? "true" : "false"),
            ("bundle_versions", counts(self.bundleVersions)),
        ])
    }
}
