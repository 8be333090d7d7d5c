import Foundation
import GateContract
import KeyStore
import PolicyModel

/// The route's fraud-risk rule applied to a verified request (`max_risk_metric`, `action`).
extension ProtectedRequestVerifier {
    /// The verified outcome with the key's risk metric (and its age) for the upstream, after
    /// the route's `max_risk_metric`: above it, `flag` adds `X-App-Attest-Risk-Exceeded` and
    /// `deny` refuses. An unknown metric passes (`RiskMetricRule`).
    func judgeRisk(
        _ risk: KeyRiskReading, identity: IdentityHeaders.Identity, route: RoutePolicy, now: Date, keyID: String?
    ) -> ProtectedRequestOutcome {
        var identity = identity
        identity.riskMetric = risk.metric
        identity.riskMetricAge = risk.age(at: now)
        guard let rule = route.riskMetric else { return .verified(identity) }
        switch rule.judge(risk.metric) {
        case .pass:
            self.metrics.riskMetricJudged(route: route.name, outcome: risk.metric == nil ? "unknown" : "pass")
            return .verified(identity)
        case .flag:
            self.metrics.riskMetricJudged(route: route.name, outcome: "flag")
            identity.riskExceeded = rule.maximum
            return .verified(identity)
        case .deny:
            self.metrics.riskMetricJudged(route: route.name, outcome: "deny")
            let error = EnforcementError(
                .riskMetricExceeded,
                "the key's fraud-risk metric \(risk.metric ?? 0) is above the route's max_risk_metric \(rule.maximum)")
            return .failed(error, keyID: keyID)
        }
    }
}
