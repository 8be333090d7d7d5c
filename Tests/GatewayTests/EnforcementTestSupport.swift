import Dispatch
import Foundation
import Synchronization
import Testing

@testable import HTTP1
@testable import Enforcement
@testable import GateContract
@testable import KeyStore
@testable import RedisClient

/// Wraps a real store and makes chosen operations fail (or never answer), to drive the
/// gate's store-error paths. Every call is forwarded unless a fault is set for it.
final class FaultInjectingStore: AttestStore {
    enum Operation: String, Sendable, CaseIterable {
        case putChallenge, consumeChallenge, createKey, fetchKey, advanceCounter, revokeKey, ping, useDebugToken
    }
    enum Fault: Sendable {
        case fail(StoreError)
        /// Never completes (to exercise timeouts of callers).
        case hang
    }

    let base: any AttestStore
    private let faults = Mutex<[Operation: Fault]>([:])
    private let calls = Mutex<[Operation: Int]>([:])
    private let queue = DispatchQueue(label: "test.fault-store")

    init(wrapping base: any AttestStore) {
        self.base = base
    }

    func set(_ fault: Fault?, for operation: Operation) {
        self.faults.withLock { $0[operation] = fault }
    }

    func callCount(_ operation: Operation) -> Int {
        self.calls.withLock { $0[operation, default: 0] }
    }

    /// Runs `forward` unless a fault is set: then completes with the failure (on the
    /// store's queue, like a real store) or never.
    private func intercept<T: Sendable>(
        _ operation: Operation,
        _ completion: @escaping @Sendable (Result<T, StoreError>) -> Void,
        forward: () -> Void
    ) {
        self.calls.withLock { $0[operation, default: 0] += 1 }
        switch self.faults.withLock({ $0[operation] }) {
        case nil: forward()
        case .hang?: return
        case .fail(let error)?: self.queue.async { completion(.failure(error)) }
        }
    }

    func putChallenge(
        _ challenge: String,
        ttlSeconds: Int,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        self.intercept(.putChallenge, completion) {
            self.base.putChallenge(challenge, ttlSeconds: ttlSeconds, completion: completion)
        }
    }
    func consumeChallenge(_ challenge: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        self.intercept(.consumeChallenge, completion) { self.base.consumeChallenge(challenge, completion: completion) }
    }
    func createKey(_ record: KeyRecord, completion: @escaping @Sendable (Result<KeyCreation, StoreError>) -> Void) {
        self.intercept(.createKey, completion) { self.base.createKey(record, completion: completion) }
    }
    func fetchKey(keyID: String, completion: @escaping @Sendable (Result<KeyRecord?, StoreError>) -> Void) {
        self.intercept(.fetchKey, completion) { self.base.fetchKey(keyID: keyID, completion: completion) }
    }
    func advanceCounter(
        keyID: String,
        to newCounter: UInt32,
        window: Int,
        completion: @escaping @Sendable (Result<CounterAdvance, StoreError>) -> Void
    ) {
        self.intercept(.advanceCounter, completion) {
            self.base.advanceCounter(keyID: keyID, to: newCounter, window: window, completion: completion)
        }
    }
    func createDebugToken(
        _ record: DebugTokenRecord, digest: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        self.base.createDebugToken(record, digest: digest, completion: completion)
    }
    func useDebugToken(
        digest: String, now: Date, completion: @escaping @Sendable (Result<DebugTokenUse, StoreError>) -> Void
    ) {
        self.intercept(.useDebugToken, completion) {
            self.base.useDebugToken(digest: digest, now: now, completion: completion)
        }
    }
    func listDebugTokens(completion: @escaping @Sendable (Result<[DebugTokenRecord], StoreError>) -> Void) {
        self.base.listDebugTokens(completion: completion)
    }
    func revokeDebugToken(name: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        self.base.revokeDebugToken(name: name, completion: completion)
    }
    func revokeKey(keyID: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        self.intercept(.revokeKey, completion) { self.base.revokeKey(keyID: keyID, completion: completion) }
    }
    func ping(completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        self.intercept(.ping, completion) { self.base.ping(completion: completion) }
    }
    func sharedSecret(
        name: String, proposed: [UInt8], completion: @escaping @Sendable (Result<[UInt8], StoreError>) -> Void
    ) {
        self.base.sharedSecret(name: name, proposed: proposed, completion: completion)
    }
}

/// Records what a `RequestGate` completed with, and how often.
final class DecisionProbe: Sendable {
    private let state = Mutex<(count: Int, first: GateDecision?)>((0, nil))

    var count: Int { self.state.withLock { $0.count } }

    /// Returns true for the first completion.
    func record(_ decision: GateDecision) -> Bool {
        self.state.withLock { state in
            state.count += 1
            if state.first == nil {
                state.first = decision
                return true
            }
            return false
        }
    }
}

/// Classifies and decides like the proxy does, waiting for the completion.
func runGate(
    _ gate: some RequestGate,
    _ head: HTTPRequestHead,
    body: [UInt8]? = nil,
    client: String = "127.0.0.1"
) async -> (GateClassification, GateDecision, DecisionProbe) {
    let classification = gate.classify(head, client: client)
    let probe = DecisionProbe()
    let decision = await withCheckedContinuation { (continuation: CheckedContinuation<GateDecision, Never>) in
        gate.decide(head, body: body, classification: classification) { decision in
            if probe.record(decision) {
                continuation.resume(returning: decision)
            }
        }
    }
    return (classification, decision, probe)
}

extension GateDecision {
    /// The forwarded head, or nil for a local response.
    var forwardedHead: HTTPRequestHead? {
        if case .forward(let head, _) = self { return head }
        return nil
    }

    var localResponse: LocalResponse? {
        if case .respond(let response, _) = self { return response }
        return nil
    }

    var logInfo: GateLogInfo {
        switch self {
        case .forward(_, let info), .respond(_, let info): return info
        }
    }

    /// The JSON body of a local response as a dictionary.
    var json: [String: Any]? {
        guard let response = self.localResponse else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
    }

    /// `error` of a local JSON error body.
    var errorCode: String? { self.json?["error"] as? String }

    var status: Int? { self.localResponse?.status }
}

/// Metrics recorded in memory, to assert on what the gate reports.
final class RecordingGateMetrics: GateMetrics {
    struct Counts: Sendable {
        var requests: [String: Int] = [:]  // "route|verdict"
        var attestations: [String: Int] = [:]
        var challenges = 0
        var latencies = 0
        var storeErrors: [String: Int] = [:]  // "operation|kind"
        var launchValidation: [String: Int] = [:]  // "category|version"
        var rollout: [String: Int] = [:]  // "route|arm|verdict"
    }
    private let counts = Mutex(Counts())

    var snapshot: Counts { self.counts.withLock { $0 } }

    func requestDecided(route: String, verdict: AttestVerdict) {
        self.counts.withLock { $0.requests["\(route)|\(verdict.rawValue)", default: 0] += 1 }
    }
    func attestation(result: String) {
        self.counts.withLock { $0.attestations[result, default: 0] += 1 }
    }
    func challengeIssued() {
        self.counts.withLock { $0.challenges += 1 }
    }
    func verificationLatency(seconds: Double) {
        self.counts.withLock { $0.latencies += 1 }
    }
    func storeError(operation: String, kind: StoreError.Kind) {
        self.counts.withLock { $0.storeErrors["\(operation)|\(kind.rawValue)", default: 0] += 1 }
    }
    func limitRefused(limit: String) {
        self.counts.withLock { $0.storeErrors["limit|\(limit)", default: 0] += 1 }
    }
    func launchValidation(category: UInt32?, bundleVersion: String?) {
        let key = "\(category.map(String.init) ?? "none")|\(bundleVersion ?? "none")"
        self.counts.withLock { $0.launchValidation[key, default: 0] += 1 }
    }
    func rolloutDecided(route: String, arm: RolloutArm, verdict: AttestVerdict) {
        self.counts.withLock { $0.rollout["\(route)|\(arm.rawValue)|\(verdict.rawValue)", default: 0] += 1 }
    }
}

func request(
    _ method: String,
    _ target: String,
    headers: [(String, String)] = []
) -> HTTPRequestHead {
    HTTPRequestHead(method: method, target: target, headers: HTTPHeaders([("Host", "api.example")] + headers))
}

/// A clock for MemoryStore's challenge expiry that tests move by hand.
final class ManualClock: Sendable {
    private let base = ContinuousClock.now
    private let offset = Mutex<Duration>(.zero)

    func now() -> ContinuousClock.Instant { self.base + self.offset.withLock { $0 } }
    func advance(by duration: Duration) { self.offset.withLock { $0 += duration } }
    /// Wall-clock time moved by the same offset (the gate's `now`: challenge expiry).
    func date() -> Date {
        let (seconds, attoseconds) = self.offset.withLock { $0 }.components
        return Date().addingTimeInterval(Double(seconds) + Double(attoseconds) / 1e18)
    }
}
