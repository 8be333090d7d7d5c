package import Foundation
package import RedisClient
import Synchronization

/// `AttestStore` in process memory: for tests and a single development node
/// (`store: memory`). Same semantics as `RedisStore`: challenges expire after their TTL
/// and are consumed once, `attested_at` keeps whole seconds, the counter advance is one
/// atomic compare-and-set. Thread-safe (one `Mutex`, never held across a callback).
/// Completions run at once, on the caller's thread, exactly once each: there is no I/O to
/// wait for, so a request verified on an event loop stays on it.
package final class MemoryStore: AttestStore, AttestationRateCounting {
    private let clock: @Sendable () -> ContinuousClock.Instant
    /// Wall-clock time of per-key limits (their day is the UTC day), in Unix microseconds.
    private let limitClock: @Sendable () -> Int64
    let state = Mutex(State())

    struct State {
        var challenges: [String: ContinuousClock.Instant] = [:]
        var keys: [String: KeyRecord] = [:]
        /// The `seen` field of each key record (counter windows), as `RedisStore` keeps it.
        var seen: [String: [UInt8]] = [:]
        /// Per-key limit state by key ID, then route name (the `limit_*` fields `RedisStore`
        /// keeps in the key record).
        var limitLedgers: [String: [String: KeyLimitLedger]] = [:]
        /// Attestations by App ID in the latest minute counted (`AttestationRateCounting`).
        var attestationMinutes: [String: (minute: Int64, count: Int)] = [:]
        var putsSincePurge = 0
        var secrets: [String: [UInt8]] = [:]
        /// Debug tokens: digest → record, and name → digest.
        var debugTokens: [String: DebugTokenRecord] = [:]
        var debugTokenNames: [String: String] = [:]
    }

    /// Expired challenges are purged every this many puts (and ignored when consumed).
    private static let purgeInterval = 1024

    /// - Parameters:
    ///   - clock: injectable for tests of challenge expiry.
    ///   - limitClock: Unix time in microseconds for per-key limits; injectable for tests.
    package init(
        clock: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now },
        limitClock: @escaping @Sendable () -> Int64 = { Int64((Date().timeIntervalSince1970 * 1e6).rounded(.down)) }
    ) {
        self.clock = clock
        self.limitClock = limitClock
    }

    private func complete<T: Sendable>(_ completion: @escaping @Sendable (Result<T, StoreError>) -> Void, _ value: T) {
        completion(.success(value))
    }

    package func putChallenge(
        _ challenge: String,
        ttlSeconds: Int,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        let now = self.clock()
        let expiry = now + .seconds(max(1, ttlSeconds))
        let stored = self.state.withLock { state -> Bool in
            state.putsSincePurge += 1
            if state.putsSincePurge >= Self.purgeInterval {
                state.putsSincePurge = 0
                state.challenges = state.challenges.filter { $0.value > now }
            }
            if let existing = state.challenges[challenge], existing > now { return false }
            state.challenges[challenge] = expiry
            return true
        }
        self.complete(completion, stored)
    }

    package func sharedSecret(
        name: String,
        proposed: [UInt8],
        completion: @escaping @Sendable (Result<[UInt8], StoreError>) -> Void
    ) {
        let secret = self.state.withLock { state -> [UInt8] in
            if let stored = state.secrets[name] { return stored }
            state.secrets[name] = proposed
            return proposed
        }
        self.complete(completion, secret)
    }

    package func consumeChallenge(
        _ challenge: String,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        let now = self.clock()
        let consumed = self.state.withLock { state -> Bool in
            guard let expiry = state.challenges.removeValue(forKey: challenge) else { return false }
            return expiry > now
        }
        self.complete(completion, consumed)
    }

    package func createKey(
        _ record: KeyRecord,
        completion: @escaping @Sendable (Result<KeyCreation, StoreError>) -> Void
    ) {
        var stored = record
        stored.attestedAt = Date(timeIntervalSince1970: TimeInterval(RedisStore.unixSeconds(record.attestedAt)))
        stored.playIntegrityVerifiedAt = record.playIntegrityVerifiedAt.map {
            Date(timeIntervalSince1970: TimeInterval(RedisStore.unixSeconds($0)))
        }
        let outcome = self.state.withLock { state -> KeyCreation in
            if state.keys[record.keyID] != nil { return .alreadyExists }
            state.keys[record.keyID] = stored
            return .created
        }
        self.complete(completion, outcome)
    }

    package func recordPlayIntegrityVerdict(
        keyID: String, verdict: String, at time: Date,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        let seconds = Date(timeIntervalSince1970: TimeInterval(RedisStore.unixSeconds(time)))
        let recorded = self.state.withLock { state -> Bool in
            guard var record = state.keys[keyID], record.status == .active else { return false }
            record.playIntegrityVerdict = verdict
            record.playIntegrityVerifiedAt = seconds
            state.keys[keyID] = record
            return true
        }
        self.complete(completion, recorded)
    }

    package func fetchKey(keyID: String, completion: @escaping @Sendable (Result<KeyRecord?, StoreError>) -> Void) {
        let record = self.state.withLock { $0.keys[keyID] }
        self.complete(completion, record)
    }

    package func advanceCounter(
        keyID: String,
        to newCounter: UInt32,
        window: Int,
        completion: @escaping @Sendable (Result<CounterAdvance, StoreError>) -> Void
    ) {
        self.complete(completion, self.advance(keyID: keyID, to: newCounter, window: window, limits: nil))
    }

    package func advanceCounterReadingRisk(
        keyID: String, to newCounter: UInt32, window: Int, lazyRefreshAt: Date?, limits: KeyLimitCharge?,
        completion: @escaping @Sendable (Result<CounterAdvanceReading, StoreError>) -> Void
    ) {
        let advance = self.advance(keyID: keyID, to: newCounter, window: window, limits: limits)
        self.complete(completion, CounterAdvanceReading(advance: advance, risk: .unknown))
    }

    /// The counter script's steps: the counter judged first, then the limits, then both written.
    private func advance(keyID: String, to newCounter: UInt32, window: Int, limits: KeyLimitCharge?) -> CounterAdvance {
        let now = limits == nil ? 0 : self.limitClock()
        return self.state.withLock { state -> CounterAdvance in
            guard var record = state.keys[keyID] else { return .unknownKey }
            if record.status == .revoked { return .revoked }
            var counters: CounterWindow?
            if window > 0 {
                var moved = CounterWindow(highest: record.counter, seen: state.seen[keyID], size: window)
                let outcome = moved.admit(newCounter)
                guard outcome != .refused else { return .notIncreasing(stored: record.counter) }
                counters = moved
            } else if record.counter >= newCounter {
                return .notIncreasing(stored: record.counter)
            }
            if let limits {
                var ledger = state.limitLedgers[keyID]?[limits.route] ?? KeyLimitLedger()
                if let refusal = ledger.charge(limits.limits, nowMicroseconds: now) { return .limited(refusal) }
                state.limitLedgers[keyID, default: [:]][limits.route] = ledger
            }
            guard let counters else {
                record.counter = newCounter
                state.keys[keyID] = record
                state.seen[keyID] = nil
                return .advanced
            }
            let advanced = counters.highest != record.counter
            record.counter = counters.highest
            state.keys[keyID] = record
            state.seen[keyID] = counters.seen
            return advanced ? .advanced : .acceptedOutOfOrder
        }
    }

    package func countAttestation(
        appID: String, minute: Int64, completion: @escaping @Sendable (Result<Int, StoreError>) -> Void
    ) {
        let count = self.state.withLock { state -> Int in
            var count = 1
            if let previous = state.attestationMinutes[appID], previous.minute == minute { count += previous.count }
            state.attestationMinutes[appID] = (minute, count)
            return count
        }
        self.complete(completion, count)
    }

    package func revokeKey(keyID: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        let revoked = self.state.withLock { state -> Bool in
            guard state.keys[keyID] != nil else { return false }
            state.keys[keyID]?.status = .revoked
            return true
        }
        self.complete(completion, revoked)
    }

    package func ping(completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        completion(.success(()))
    }
}
