package import Foundation
package import RedisClient

/// Shared state of the gateway: challenges, attested keys and their counters.
///
/// Every method is asynchronous and never blocks the caller. Every call completes exactly
/// once, with `.failure(StoreError)` on timeout, disconnect or a bad reply. `RedisStore`
/// completes on the calling event loop when called from one (else on its own queue);
/// `MemoryStore` completes at once, inside the call. Implementations: `RedisStore` (shared,
/// production) and `MemoryStore` (tests, `store: memory` single node); one conformance suite.
package protocol AttestStore: AnyObject, Sendable, StoreHealthReporting {
    /// The fraud-risk state this store keeps beside its keys, or nil (see `FraudRiskStore`).
    var fraudRiskState: (any FraudRiskStore)? { get }

    /// Marks a challenge redeemed for `ttlSeconds` (Redis `SET key 1 EX ttl NX`).
    /// Completes `true` the first time, `false` when it was already marked (a second use).
    /// Challenges are stateless tokens (`ChallengeTokens`): only redemptions are stored.
    func putChallenge(
        _ challenge: String, ttlSeconds: Int, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void)

    /// Consumes a challenge: true exactly once per stored, unexpired challenge (`GETDEL`).
    func consumeChallenge(_ challenge: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void)

    /// Creates the key record unless one exists for the key ID. Completes `.created`
    /// or `.alreadyExists`.
    func createKey(_ record: KeyRecord, completion: @escaping @Sendable (Result<KeyCreation, StoreError>) -> Void)

    /// The key record, or nil when the key ID was never attested.
    func fetchKey(keyID: String, completion: @escaping @Sendable (Result<KeyRecord?, StoreError>) -> Void)

    /// Compare-and-set, atomically across every gateway. With `window` 0: sets the counter
    /// to `newCounter` only if the stored counter is lower and the key is active. With a
    /// window N > 0: `CounterWindow`'s rule (a counter up to N - 1 below the highest passes
    /// once), the seen-map updated in the same atomic step.
    func advanceCounter(
        keyID: String, to newCounter: UInt32, window: Int,
        completion: @escaping @Sendable (Result<CounterAdvance, StoreError>) -> Void)

    /// `advanceCounter` that also reads the key's fraud-risk fields in the same round trip
    /// (`KeyRiskReading`: metric, its time, refresh due), and charges the route's per-key
    /// limits (`limits`, nil: none) in the same atomic step: a counter the limits refuse is not
    /// advanced (`.limited`), and a counter the store refuses is never charged. `lazyRefreshAt`
    /// nil: the due flag is never set. Stores that keep no fraud-risk state answer
    /// `KeyRiskReading.unknown`.
    func advanceCounterReadingRisk(
        keyID: String, to newCounter: UInt32, window: Int, lazyRefreshAt: Date?, limits: KeyLimitCharge?,
        completion: @escaping @Sendable (Result<CounterAdvanceReading, StoreError>) -> Void)

    /// Records a new Play Integrity verdict for the key (`KeyRecord.playIntegrityVerdict`
    /// and `playIntegrityVerifiedAt`, whole seconds). Completes false when no such key exists
    /// or it is revoked.
    func recordPlayIntegrityVerdict(
        keyID: String, verdict: String, at time: Date,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void)

    /// Marks the key revoked. Completes false when no such key exists.
    func revokeKey(keyID: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void)

    /// The secret shared by every gateway under `name`: the stored one, or `proposed` when none
    /// was stored yet (Redis `SET key value NX GET`, one round trip, first writer wins).
    /// Used for the challenge-signing key when the policy names no key file.
    func sharedSecret(
        name: String, proposed: [UInt8], completion: @escaping @Sendable (Result<[UInt8], StoreError>) -> Void)
    /// Stores a debug token's record under its digest (`DebugTokens.digest`). Completes false
    /// when a token of that name exists.
    func createDebugToken(
        _ record: DebugTokenRecord, digest: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void)

    /// Looks a presented token up by digest and, when valid at `now`, records `now` as its last use.
    func useDebugToken(
        digest: String, now: Date, completion: @escaping @Sendable (Result<DebugTokenUse, StoreError>) -> Void)

    /// Every debug token's record (never a secret), by name.
    func listDebugTokens(completion: @escaping @Sendable (Result<[DebugTokenRecord], StoreError>) -> Void)

    /// Deletes the named token. Completes false when there is none.
    func revokeDebugToken(name: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void)

    /// Round trip to the backend, for /readyz.
    func ping(completion: @escaping @Sendable (Result<Void, StoreError>) -> Void)
}

extension AttestStore {
    /// Test doubles that keep no Play Integrity verdicts: the call fails (the caller refuses).
    package func recordPlayIntegrityVerdict(
        keyID: String, verdict: String, at time: Date,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        completion(.failure(StoreError(.protocolError, "this store keeps no Play Integrity verdicts")))
    }

    /// No fraud-risk state and no per-key limits (test doubles): the counter alone. Asked to
    /// charge limits it cannot keep, it fails (the route's `on_store_error` decides) rather
    /// than admit an unlimited request.
    package func advanceCounterReadingRisk(
        keyID: String, to newCounter: UInt32, window: Int, lazyRefreshAt: Date?, limits: KeyLimitCharge?,
        completion: @escaping @Sendable (Result<CounterAdvanceReading, StoreError>) -> Void
    ) {
        guard limits == nil else {
            completion(.failure(StoreError(.protocolError, "this store does not keep per-key limits")))
            return
        }
        self.advanceCounter(keyID: keyID, to: newCounter, window: window) {
            completion($0.map { CounterAdvanceReading(advance: $0, risk: .unknown) })
        }
    }

    /// `advanceCounterReadingRisk` without per-key limits.
    package func advanceCounterReadingRisk(
        keyID: String, to newCounter: UInt32, window: Int, lazyRefreshAt: Date?,
        completion: @escaping @Sendable (Result<CounterAdvanceReading, StoreError>) -> Void
    ) {
        self.advanceCounterReadingRisk(
            keyID: keyID, to: newCounter, window: window, lazyRefreshAt: lazyRefreshAt, limits: nil,
            completion: completion)
    }

    /// Apple's strict rule: `advanceCounter(keyID:to:window: 0)`.
    package func advanceCounter(
        keyID: String, to newCounter: UInt32,
        completion: @escaping @Sendable (Result<CounterAdvance, StoreError>) -> Void
    ) {
        self.advanceCounter(keyID: keyID, to: newCounter, window: 0, completion: completion)
    }
}

package enum KeyStatus: String, Sendable, Hashable {
    case active, revoked
}

/// One attested device key. Stored as one Redis hash named `appattest:key:{<keyID>}`.
package struct KeyRecord: Sendable, Hashable {
    /// Standard base64 of the 32-byte key ID, as the app sends it.
    package var keyID: String
    /// 65-byte X9.62 uncompressed point.
    package var publicKey: [UInt8]
    package var counter: UInt32
    package var appID: String
    /// "production" or "development".
    package var environment: String
    package var receipt: [UInt8]
    package var attestedAt: Date
    package var status: KeyStatus
    /// `apple_validation_category_01` of the attestation (iOS 27+), nil when none.
    package var validationCategory: UInt32?
    /// `apple_bundle_version_01` of the attestation (iOS 27+), nil when none.
    package var bundleVersion: String?
    /// The key access-control extension's verdict at attestation (macOS 27+:
    /// `macos_full_security` or `other`), nil when the certificate had none.
    package var keyAccessPolicy: String?
    /// The platform whose key this is: nil for App Attest (every record written before
    /// Android keys existed), `android` for an Android Keystore key (`KeyRecord.androidPlatform`).
    package var platform: String? = nil
    /// Android keys of an app with `play_integrity:`: the last Play Integrity verdict the
    /// gateway accepted for the key (`verified`, or `unverified` when Google could not be
    /// asked and the policy said `on_unavailable: allow`) and when. nil otherwise.
    package var playIntegrityVerdict: String? = nil
    /// Whole Unix seconds (as stored); `reverify_after` is measured from it.
    package var playIntegrityVerifiedAt: Date? = nil

    /// `playIntegrityVerdict` of an accepted verdict.
    package static let playIntegrityVerified = "verified"
    /// `playIntegrityVerdict` of a key enrolled while Google could not be asked.
    package static let playIntegrityUnverified = "unverified"

    /// `platform` of an Android Keystore key.
    package static let androidPlatform = "android"

    package init(
        keyID: String, publicKey: [UInt8], counter: UInt32, appID: String, environment: String,
        receipt: [UInt8], attestedAt: Date, status: KeyStatus = .active,
        validationCategory: UInt32? = nil, bundleVersion: String? = nil, keyAccessPolicy: String? = nil
    ) {
        self.keyID = keyID
        self.publicKey = publicKey
        self.counter = counter
        self.appID = appID
        self.environment = environment
        self.receipt = receipt
        self.attestedAt = attestedAt
        self.status = status
        self.validationCategory = validationCategory
        self.bundleVersion = bundleVersion
        self.keyAccessPolicy = keyAccessPolicy
    }
}

package enum KeyCreation: Sendable, Hashable {
    case created, alreadyExists
}

/// A counter advance and the key's fraud-risk fields read with it.
package struct CounterAdvanceReading: Sendable, Hashable {
    package var advance: CounterAdvance
    package var risk: KeyRiskReading

    package init(advance: CounterAdvance, risk: KeyRiskReading) {
        self.advance = advance
        self.risk = risk
    }
}

package enum CounterAdvance: Sendable, Hashable {
    /// The counter is now the new value.
    case advanced
    /// Below the highest counter but inside the window and never seen: accepted once.
    case acceptedOutOfOrder
    /// The stored counter is already >= the proposed one (replay or reordering); with a
    /// window, the counter was seen already or lies below the window.
    case notIncreasing(stored: UInt32)
    case unknownKey
    case revoked
    /// The counter would pass, but the route's per-key limit refused the request: nothing was
    /// written (the counter did not move, no token or quota was spent).
    case limited(KeyLimitRefusal)
}

extension AttestStore {
    /// A store without connections is ready while it exists; `RedisStore` reports its own.
    package var storeHealth: StoreHealth { .alwaysReady }
}
