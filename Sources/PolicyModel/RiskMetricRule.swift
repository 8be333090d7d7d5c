/// A route's fraud-risk rule: `max_risk_metric: N` with `action: flag | deny`.
///
/// The metric is Apple's approximate count of this app's attested keys on the device over 30
/// days (docs/apple-services.md); Apple asks that it be used as a signal, so the default
/// action only flags. A key whose metric is unknown (no refreshed receipt yet: the
/// attestation's own receipt carries none) passes unflagged under both actions: denying it
/// would refuse every freshly attested key until its first refresh, and the upstream tells
/// the two cases apart by the absence of `X-App-Attest-Risk-Metric`.
public struct RiskMetricRule: Sendable, Hashable {
    public enum Action: String, Sendable, Hashable, CaseIterable {
        /// Forward, with `X-App-Attest-Risk-Exceeded: <max>` for the upstream to weigh.
        case flag
        /// Refuse: 403 `risk_metric_exceeded` (forwarded as failed on a monitor route).
        case deny
    }

    /// Highest metric admitted without the action.
    public var maximum: Int
    public var action: Action

    public init(maximum: Int, action: Action = .flag) {
        self.maximum = maximum
        self.action = action
    }

    /// Largest `max_risk_metric` accepted (the metric is a count of keys over 30 days).
    public static let maximumValue = 1_000_000

    /// What the rule says about a key's metric: nil (unknown) and metrics up to `maximum` pass.
    public func judge(_ metric: Int?) -> Verdict {
        guard let metric, metric > self.maximum else { return .pass }
        return self.action == .flag ? .flag : .deny
    }

    public enum Verdict: Sendable, Hashable {
        case pass, flag, deny
    }
}
