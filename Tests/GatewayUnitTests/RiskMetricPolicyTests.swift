import Foundation
import GatewayTesting
import Testing
import Verification

@testable import AppleClient
@testable import KeyStore
@testable import PolicyModel

/// `max_risk_metric` / `action` (issue 13): decoding, errors that name line and field, the
/// rule's verdicts (unknown passes), and `keys show`'s fraud-risk fields.
@Suite struct RiskMetricPolicyTests {
    static let header = RequestProofPolicyTests.header

    /// The error of the policy whose one route (`/` to `api`) has `lines` as its further keys
    /// (each line after the first indented as a route key).
    static func routeError(_ lines: String, sourceLocation: SourceLocation = #_sourceLocation) -> PolicyError? {
        policyError(
            Self.header + """
                routes:
                  - match: { path_prefix: / }
                    upstream: api
                    \(lines.replacingOccurrences(of: "\n", with: "\n    "))
                """, sourceLocation: sourceLocation)
    }

    @Test func keysAreReadWithFlagAsTheDefaultAction() throws {
        let policy = try PolicyLoader.parse(
            Self.header + """
                routes:
                  - name: flagged
                    match: { path_prefix: /a }
                    upstream: api
                    max_risk_metric: 5
                  - name: denied
                    match: { path_prefix: /b }
                    upstream: api
                    max_risk_metric: 20
                    action: deny
                  - name: none
                    match: { path_prefix: /c }
                    upstream: api
                """, sourcePath: "p.yaml")
        #expect(policy.routes[0].riskMetric == RiskMetricRule(maximum: 5, action: .flag))
        #expect(policy.routes[1].riskMetric == RiskMetricRule(maximum: 20, action: .deny))
        #expect(policy.routes[2].riskMetric == nil)
        #expect(PolicySummary.describe(policy.routes[1]).contains("max_risk_metric=20 action=deny"))
    }

    @Test(arguments: [
        ("max_risk_metric: -1", PolicyError.Code.outOfRange, "routes[0].max_risk_metric"),
        ("max_risk_metric: 1000001", .outOfRange, "routes[0].max_risk_metric"),
        ("max_risk_metric: many", .wrongType, "routes[0].max_risk_metric"),
        ("action: deny", .invalidValue, "routes[0].action"),
    ])
    func badValuesNameTheField(setting: String, code: PolicyError.Code, field: String) {
        let error = Self.routeError(setting)
        #expect(error?.code == code, "\(String(describing: error))")
        #expect(error?.field == field, "\(String(describing: error))")
    }

    @Test func anUnknownActionIsRefused() {
        let error = Self.routeError("max_risk_metric: 3\naction: block")
        #expect(error?.code == .invalidValue)
        #expect(error?.field == "routes[0].action")
    }

    @Test func unknownMetricsPassAndOnlyMetricsAboveTheMaximumTrigger() {
        let deny = RiskMetricRule(maximum: 10, action: .deny)
        #expect(deny.judge(nil) == .pass)
        #expect(deny.judge(0) == .pass)
        #expect(deny.judge(10) == .pass)
        #expect(deny.judge(11) == .deny)
        let flag = RiskMetricRule(maximum: 10)
        #expect(flag.judge(11) == .flag)
        #expect(flag.judge(nil) == .pass)
    }

    @Test func theAgeIsWholeSecondsAndOnlyWithAMetric() {
        let made = Date(timeIntervalSince1970: 1_000)
        #expect(KeyRiskReading(metric: 3, metricTime: made).age(at: made.addingTimeInterval(90.7)) == 90)
        #expect(KeyRiskReading(metric: 3, metricTime: made).age(at: made.addingTimeInterval(-5)) == 0)
        #expect(KeyRiskReading(metric: nil, metricTime: made).age(at: made) == nil)
    }

    @Test func keysShowAddsTheMetricAndTheRefreshState() throws {
        let record = KeyRecord(
            keyID: "a2V5", publicKey: [4] + [UInt8](repeating: 1, count: 64), counter: 3,
            appID: "ABCDE12345.com.example.app", environment: "production", receipt: [1],
            attestedAt: Date(timeIntervalSince1970: 1_763_000_000))
        #expect(KeyAdministration.json(record, fraudRisk: nil) == KeyAdministration.json(record))
        var state = FraudRiskRefresh(attestedAt: record.attestedAt)
        let made = Date(timeIntervalSince1970: 1_763_000_100)
        let payload = FraudRiskRefreshTests.payload(metric: 7, created: made, notBefore: nil)
        _ = state.handle(.refreshed(receipt: [2], payload: payload), at: made, jitter: 0)
        let text = KeyAdministration.json(record, fraudRisk: state)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(object["risk_metric"] as? Int == 7)
        #expect(object["risk_metric_time"] as? String == "2025-11-13T02:15:00Z")
        let refresh = try #require(object["fraud_risk"] as? [String: Any])
        #expect(refresh["status"] as? String == "scheduled")
        #expect(refresh["last_outcome"] as? String == "refreshed")
        #expect(refresh["failures"] as? Int == 0)
        #expect(refresh["next_attempt"] as? String == "2025-11-14T02:15:00Z")
        #expect(refresh["last_attempt"] as? String == "2025-11-13T02:15:00Z")
        #expect(object["counter"] as? Int == 3, "the record's own fields stay")
    }
}
