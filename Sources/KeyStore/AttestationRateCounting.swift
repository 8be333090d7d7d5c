package import RedisClient

/// A store that counts attestations per App ID per minute across the fleet (the farm alarm of
/// issue 34): `RedisStore` (one shared counter per app and minute) and `MemoryStore` (this
/// process only). Stores that do not (test doubles) are simply not counted.
package protocol AttestationRateCounting: Sendable {
    /// Counts one attestation of `appID` in the minute `minute` (Unix seconds / 60) and
    /// completes with that minute's count so far, fleet-wide.
    func countAttestation(
        appID: String, minute: Int64, completion: @escaping @Sendable (Result<Int, StoreError>) -> Void)
}
