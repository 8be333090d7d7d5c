import Foundation

/// The app's App Attest key ID and where it stands with the gateway. Persisted by a
/// `KeyStore` **before** `attestKey` is called, so that an app killed mid-enrollment resumes
/// with the same key instead of generating (and paying Apple for) another one.
public struct StoredKey: Codable, Hashable, Sendable {
    public enum State: String, Codable, Hashable, Sendable {
        /// Generated; attestation not yet confirmed by the gateway.
        case pending
        /// The gateway accepted the attestation (201, or 409 for this very key).
        case attested
        /// The gateway answered `revoked_key`: the operator blocked this install. Requests to
        /// protected routes fail fast until `AttestedClient.resetKey()`.
        case revoked
    }

    public var keyID: String
    public var state: State

    public init(keyID: String, state: State) {
        self.keyID = keyID
        self.state = state
    }
}

/// Where the key ID lives between launches. On Apple platforms `KeychainKeyStore` (this device
/// only); `InMemoryKeyStore` for tests and previews.
///
/// Calls are synchronous and made from the client's actor, never from the main actor.
public protocol KeyStore: Sendable {
    func load() throws -> StoredKey?
    func save(_ key: StoredKey) throws
    func delete() throws
}

/// A `KeyStore` in memory: lost on exit. Tests share one instance between client instances to
/// play an app that is killed and relaunched.
public final class InMemoryKeyStore: KeyStore, @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var key: StoredKey?
    private var saves: [StoredKey] = []

    public init(_ key: StoredKey? = nil) {
        self.key = key
    }

    public func load() throws -> StoredKey? {
        self.lock.withLock { self.key }
    }

    public func save(_ key: StoredKey) throws {
        self.lock.withLock {
            self.key = key
            self.saves.append(key)
        }
    }

    public func delete() throws {
        self.lock.withLock { self.key = nil }
    }

    /// Every value saved so far, in order (for tests).
    public var history: [StoredKey] {
        self.lock.withLock { self.saves }
    }
}
