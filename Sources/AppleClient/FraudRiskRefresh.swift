public import Foundation
public import Verification

/// When to ask Apple for a new fraud-risk receipt for one attested key, and what to keep:
/// a state machine value, no I/O. The caller (background sweep, or lazily when a key is used
/// and `isDue`) sends the current receipt, feeds the outcome to `handle`, persists the value
/// (it is `Codable`) next to the key record, and follows the returned `FraudRiskAction`.
///
/// Rules (Apple's guidance and forum reports; docs/apple-services.md):
/// - 200 (verified): store the receipt and its risk metric; next refresh after
///   `refreshInterval` (a day) and never before the receipt's not-before (field 19).
/// - 304: too early; retry after `notModifiedRetry`, doubling, at most `refreshInterval`.
/// - 404: no data, possibly for a while (receipts "come back to life"); keep the last
///   receipt and metric, back off from a day, doubling up to `maximumBackoff`, never give up.
///   400 and a receipt that fails verification back off the same way.
/// - 429, 5xx, malformed or missing answers: exponential backoff with jitter from
///   `transientInitialBackoff` to `transientMaximumBackoff`, never sooner than `Retry-After`.
/// - 401: configuration error (team ID, key ID or key): halt and alert; `resume` after a fix.
///
/// `jitter` is a number in [0, 1) from the caller's random source, so tests are exact.
public struct FraudRiskRefresh: Sendable, Hashable, Codable {
    public enum Status: String, Sendable, Hashable, Codable {
        /// Waiting for the next regular refresh (or the first one).
        case scheduled
        /// The last attempt failed; waiting out a backoff.
        case backingOff
        /// Apple refused our credentials; no attempt until `resume`.
        case halted
    }

    public private(set) var status: Status
    /// When the next attempt is due; nil while halted.
    public private(set) var nextAttempt: Date?
    /// Consecutive attempts without a new receipt (304 excluded): the backoff exponent.
    public private(set) var failures: Int
    /// Stable code of the last outcome: `refreshed`, `not_modified`, `no_data`, an
    /// `AppleError` code or a `VerificationError` code; nil before the first attempt.
    public private(set) var lastOutcome: String?
    public private(set) var lastAttempt: Date?
    /// Consecutive 304s: their backoff exponent.
    public private(set) var notModifiedCount: Int
    /// Field 17 of the last verified refreshed receipt; kept through 404s and failures.
    public private(set) var riskMetric: Int?
    /// Creation time (field 12) of the receipt that carried `riskMetric`: its age is what the
    /// upstream gets next to the metric.
    public private(set) var riskMetricTime: Date?
    /// Field 19 of the current receipt.
    public private(set) var receiptNotBefore: Date?
    /// Field 21 of the current receipt (informational: after it Apple may stop refreshing it).
    public private(set) var receiptExpiration: Date?

    /// The state of a key just attested. `receipt` is the verified `attStmt.receipt` when the
    /// attest endpoint verified it; the first refresh is due at once (or at its not-before).
    public init(attestedAt: Date, receipt: Receipt? = nil) {
        self.status = .scheduled
        self.nextAttempt = max(attestedAt, receipt?.notBefore ?? attestedAt)
        self.failures = 0
        self.notModifiedCount = 0
        self.riskMetric = receipt?.riskMetric
        self.riskMetricTime = receipt?.riskMetric == nil ? nil : receipt?.creationTime
        self.receiptNotBefore = receipt?.notBefore
        self.receiptExpiration = receipt?.expirationTime
    }

    /// True when an attempt is due at `now` (never while halted).
    public func isDue(at now: Date) -> Bool {
        guard let nextAttempt = self.nextAttempt else { return false }
        return now >= nextAttempt
    }

    /// Applies the outcome of the attempt made at `now`.
    public mutating func handle(
        _ event: FraudRiskEvent,
        at now: Date,
        policy: FraudRiskRefreshPolicy = FraudRiskRefreshPolicy(),
        jitter: Double
    ) -> FraudRiskAction {
        let jitter = min(max(jitter, 0), 0.999_999)
        self.lastAttempt = now
        switch event {
        case .refreshed(let receipt, let payload):
            self.status = .scheduled
            self.failures = 0
            self.notModifiedCount = 0
            self.lastOutcome = "refreshed"
            if let metric = payload.riskMetric {
                self.riskMetric = metric
                self.riskMetricTime = payload.creationTime
            }
            self.receiptNotBefore = payload.notBefore
            self.receiptExpiration = payload.expirationTime
            var next = now.adding(policy.refreshInterval)
            if let notBefore = payload.notBefore, notBefore > next { next = notBefore }
            next = next.adding(seconds: Self.seconds(policy.refreshInterval) * policy.spread * jitter)
            self.nextAttempt = next
            return .storeReceipt(receipt, nextAttempt: next)

        case .notModified:
            self.status = .scheduled
            self.lastOutcome = "not_modified"
            self.notModifiedCount += 1
            let delay = Self.doubled(
                policy.notModifiedRetry, times: self.notModifiedCount - 1, cap: policy.refreshInterval)
            var next = now.adding(seconds: delay * (1 + policy.spread * jitter))
            if let notBefore = self.receiptNotBefore, notBefore > next { next = notBefore }
            return self.retry(at: next)

        case .noData:
            return self.longBackoff("no_data", now, policy, jitter)

        case .receiptRejected(let error):
            return self.longBackoff(error.code.rawValue, now, policy, jitter)

        case .failed(let error, let retryAfter):
            if error.code == .unauthorized {
                self.status = .halted
                self.nextAttempt = nil
                self.lastOutcome = error.code.description
                return .halt(error)
            }
            if error.code == .badRequest || error.code == .invalidRequest || error.code == .unexpectedStatus {
                return self.longBackoff(error.code.description, now, policy, jitter)
            }
            // Transient (429, 5xx, malformed, unreachable): equal jitter, half fixed, half random.
            self.status = .backingOff
            self.failures += 1
            self.lastOutcome = error.code.description
            let delay = Self.doubled(
                policy.transientInitialBackoff, times: self.failures - 1, cap: policy.transientMaximumBackoff)
            var seconds = delay / 2 + delay / 2 * jitter
            if let retryAfter { seconds = max(seconds, Self.seconds(retryAfter)) }
            return self.retry(at: now.adding(seconds: seconds))
        }
    }

    /// Leaves `halted` after the configuration was fixed (a reload with new credentials):
    /// the key is due at `now`.
    public mutating func resume(at now: Date) {
        guard self.status == .halted else { return }
        self.status = .scheduled
        self.failures = 0
        self.nextAttempt = now
    }

    /// 404, 400, a rejected receipt: from `noDataInitialBackoff`, doubling to `maximumBackoff`;
    /// the jitter only adds, so two attempts are never closer than a day by default.
    private mutating func longBackoff(
        _ outcome: String, _ now: Date, _ policy: FraudRiskRefreshPolicy, _ jitter: Double
    ) -> FraudRiskAction {
        self.status = .backingOff
        self.failures += 1
        self.lastOutcome = outcome
        let delay = Self.doubled(policy.noDataInitialBackoff, times: self.failures - 1, cap: policy.maximumBackoff)
        return self.retry(at: now.adding(seconds: delay * (1 + policy.spread * jitter)))
    }

    private mutating func retry(at next: Date) -> FraudRiskAction {
        self.nextAttempt = next
        return .retry(at: next)
    }

    /// `base × 2^times` in seconds, at most `cap` (no overflow for any `times`).
    static func doubled(_ base: Duration, times: Int, cap: Duration) -> Double {
        let capSeconds = Self.seconds(cap)
        var value = Self.seconds(base)
        var remaining = max(times, 0)
        while remaining > 0 && value < capSeconds {
            value *= 2
            remaining -= 1
        }
        return min(value, capSeconds)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

extension Date {
    fileprivate func adding(_ duration: Duration) -> Date {
        self.addingTimeInterval(FraudRiskRefresh.seconds(duration))
    }

    fileprivate func adding(seconds: Double) -> Date {
        self.addingTimeInterval(seconds)
    }
}
