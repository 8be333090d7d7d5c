package import AppleClient
package import Foundation
package import RedisClient

/// The fraud-risk state a store keeps beside each key (receipt, metric, refresh schedule) and
/// the fleet's refresh lease. Only a shared store keeps it: a memory store has no fleet to
/// share refreshes with, so its `AttestStore.fraudRiskState` is nil.
package protocol FraudRiskStore: AttestStore {
    /// Puts the key in the due set at `time`.
    func scheduleFraudRisk(
        keyID: String, at time: Date, completion: @escaping @Sendable (Result<Void, StoreError>) -> Void)

    /// Takes (or renews, for the same `owner`) the fleet-wide refresh lease for `ttl`.
    func claimFraudRiskLease(
        owner: String, ttl: Duration, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void)

    func releaseFraudRiskLease(owner: String, completion: @escaping @Sendable (Result<Void, StoreError>) -> Void)

    /// Up to `limit` keys due at `now`, oldest first.
    func dueFraudRiskKeys(
        now: Date, limit: Int, completion: @escaping @Sendable (Result<[String], StoreError>) -> Void)

    func fetchFraudRisk(
        keyID: String, completion: @escaping @Sendable (Result<FraudRiskRefresh?, StoreError>) -> Void)

    /// Saves the state (and the receipt to send next time, when given); `schedule` puts the
    /// key in the due set at the state's next refresh.
    func saveFraudRisk(
        keyID: String, state: FraudRiskRefresh, receipt: [UInt8]?, schedule: Bool,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void)

    /// Moves the key to the front of the due set (fire and forget).
    func wakeFraudRisk(keyID: String, now: Date)
}

extension AttestStore {
    /// No fraud-risk state: the default of every store but a shared one.
    package var fraudRiskState: (any FraudRiskStore)? { nil }
}
