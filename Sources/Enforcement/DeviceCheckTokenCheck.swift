import AppleClient
import Foundation

/// Checks `X-App-Attest-Token` on a route with `fallback: devicecheck`: the token codec over the
/// challenge keyring's current keys, the policy's App IDs and the DeviceCheck environment.
/// Stateless (no store round trip); any queue.
struct DeviceCheckTokenCheck: Sendable {
    let keyring: ChallengeKeyring
    let ttlSeconds: Int
    let appIDs: [String]
    let environment: AppleEnvironment

    /// The token's claims or why it is refused; nil while the keyring is not loaded (the
    /// route's `on_store_error` decides, as for challenges).
    func check(_ text: String, now: Date) -> Result<DeviceCheckTokens.Claims, DeviceCheckTokens.Problem>? {
        guard let keys = self.keyring.keys() else { return nil }
        // Deriving the keys costs two HMACs and a hash per listed key (a few microseconds):
        // cheaper than caching them across key rotations.
        return DeviceCheckTokens(challengeKeys: keys, ttlSeconds: self.ttlSeconds).check(
            text, appIDs: self.appIDs, environment: self.environment,
            now: Int64(now.timeIntervalSince1970.rounded(.down)))
    }
}
