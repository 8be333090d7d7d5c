public import Foundation

/// What the caller does after `FraudRiskRefresh.handle`: always persist the refresh state,
/// and then this.
public enum FraudRiskAction: Sendable, Hashable {
    /// Store `receipt` as the key's current receipt (the next refresh sends it), with the
    /// state's `riskMetric`; the next attempt is at `nextAttempt`.
    case storeReceipt([UInt8], nextAttempt: Date)
    /// Keep the current receipt; try again at `nextAttempt`.
    case retry(at: Date)
    /// Stop refreshing and alert: Apple refused our credentials (401). Nothing will work
    /// until the configuration is fixed, so the client should stop calling Apple for every
    /// key, not just this one; `FraudRiskRefresh.resume` restarts after a reload.
    case halt(AppleError)
}
