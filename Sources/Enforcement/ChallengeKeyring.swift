import Dispatch
import GatewayIO
import Glibc
package import KeyStore
import PolicyModel
import RedisClient
import Synchronization

/// The keys every gateway of a fleet signs and checks challenges with (`ChallengeTokens`).
///
/// From `challenge_key_file:` when the policy names one; otherwise one random 32-byte key is
/// created by the first gateway that asks the store for it, and read by every later one
/// (`AttestStore.sharedSecret`, Redis `SET … NX GET`), so a fleet shares it with no setup.
/// A store-backed keyring that could not load yet (Redis down at start) retries on the next
/// challenge request; until then the endpoints answer 503 `store_error`.
package final class ChallengeKeyring: Sendable {
    /// The store key's name (`appattest:secret:{challenge-hmac-v1}` in Redis).
    package static let secretName = "challenge-hmac-v1"

    private enum Source: Sendable {
        case fixed
        case store(any AttestStore)
    }

    private struct State {
        var keys: [[UInt8]]?
        var loading = false
    }

    private let source: Source
    private let state: Mutex<State>
    /// With the store down, every challenge asks for the key again: one warning per interval,
    /// with how many it stands for, not one per request.
    private let unavailableLog = LogThrottle(interval: .seconds(10))

    /// Keys from a file (already validated): first signs.
    package init(keys: [[UInt8]]) {
        precondition(!keys.isEmpty, "a keyring needs a key")
        self.source = .fixed
        self.state = Mutex(State(keys: keys))
    }

    /// The key shared through `store`; starts loading at once.
    package init(store: any AttestStore) {
        self.source = .store(store)
        self.state = Mutex(State())
        self.load()
    }

    /// The keys, or nil while a store-backed key is not loaded (a load is then under way).
    package func keys() -> [[UInt8]]? {
        if let keys = self.state.withLock({ $0.keys }) { return keys }
        self.load()
        return nil
    }

    /// Waits (off the event loops: at start and reload) until the key is loaded or `timeout` passes.
    @discardableResult
    package func waitUntilLoaded(timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if self.state.withLock({ $0.keys != nil }) { return true }
            self.load()
            usleep(10_000)
        }
        return self.state.withLock { $0.keys != nil }
    }

    private func load() {
        guard case .store(let store) = self.source else { return }
        let start = self.state.withLock { state -> Bool in
            guard state.keys == nil, !state.loading else { return false }
            state.loading = true
            return true
        }
        guard start else { return }
        var generator = SystemRandomNumberGenerator()
        var proposed: [UInt8] = []
        for _ in 0..<4 {
            let word = generator.next()
            for j in 0..<8 { proposed.append(UInt8(truncatingIfNeeded: word >> (8 * UInt64(j)))) }
        }
        store.sharedSecret(name: Self.secretName, proposed: proposed) { [self] result in
            self.state.withLock { state in
                state.loading = false
                if case .success(let key) = result, key.count >= ChallengeKeyFile.minimumKeyBytes {
                    state.keys = [key]
                }
            }
            switch result {
            case .success(let key) where key.count < ChallengeKeyFile.minimumKeyBytes:
                Log.error("challenge_key_invalid", [("reason", "the stored challenge key is \(key.count) bytes")])
            case .failure(let error):
                if let suppressed = self.unavailableLog.admit() {
                    Log.warning(
                        "challenge_key_unavailable",
                        [("error", error.description), ("suppressed", String(suppressed))])
                }
            case .success:
                break
            }
        }
    }
}
