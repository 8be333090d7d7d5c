import Foundation
import KeyStore
import RedisClient

/// The challenges of this fleet as the gate uses them: minted by the challenge endpoint,
/// checked without I/O and then redeemed once in the store by a protected request or an
/// attestation that otherwise verified (`ChallengeTokens` describes the token).
///
/// Immutable; any queue.
final class IssuedChallenges: Sendable {
    private let keyring: ChallengeKeyring
    private let ttlSeconds: Int
    private let store: any AttestStore
    private let now: @Sendable () -> Date

    init(keyring: ChallengeKeyring, ttlSeconds: Int, store: any AttestStore, now: @escaping @Sendable () -> Date) {
        self.keyring = keyring
        self.ttlSeconds = ttlSeconds
        self.store = store
        self.now = now
    }

    /// A fresh challenge; nil while a store-shared key is loading. Stateless: minting writes
    /// nothing to the store.
    func mint() -> String? {
        self.tokens()?.mint(now: self.unixNow())
    }

    /// Checks a challenge's tag and expiry without I/O: the error to answer, or the checked token.
    func check(_ text: String) -> Result<ChallengeTokens.Checked, EnforcementError> {
        guard let tokens = self.tokens() else { return .failure(.challengesUnavailable()) }
        switch tokens.check(text, now: self.unixNow()) {
        case .success(let checked): return .success(checked)
        case .failure(let problem): return .failure(EnforcementError(.challengeInvalid, problem.rawValue))
        }
    }

    /// Redeems a checked challenge once, fleet-wide: the store's "used" marker lives as long as
    /// the challenge would have. Completes `false` when it was already redeemed.
    func redeem(
        _ challenge: ChallengeTokens.Checked,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        self.store.putChallenge(challenge.text, ttlSeconds: challenge.remainingSeconds + 1, completion: completion)
    }

    /// The keys with the policy's TTL; nil while a store-shared key is loading.
    private func tokens() -> ChallengeTokens? {
        guard let keys = self.keyring.keys() else { return nil }
        return ChallengeTokens(keys: keys, ttlSeconds: self.ttlSeconds)
    }

    private func unixNow() -> Int64 { Int64(self.now().timeIntervalSince1970.rounded(.down)) }
}
