import Dispatch
import Enforcement
package import Foundation
package import GateContract
// The gate's test doubles and drivers, for the unit and the integration tests: a store that
// fails on demand, `runGate`, a recording `GateMetrics`, a hand-moved clock.
import GatewayIO
package import HTTP1
package import KeyStore
package import RedisClient
import Synchronization

/// Wraps a real store and makes chosen operations fail (or never answer), to drive the
/// gate's store-error paths. Every call is forwarded unless a fault is set for it.
package final class FaultInjectingStore: AttestStore {
    package enum Operation: String, Sendable, CaseIterable {
        case putChallenge, consumeChallenge, createKey, fetchKey, advanceCounter, revokeKey, ping, useDebugToken
    }
    package enum Fault: Sendable {
        case fail(StoreError)
        /// Never completes (to exercise timeouts of callers).
        case hang
    }

    package let base: any AttestStore
    private let faults = Mutex<[Operation: Fault]>([:])
    private let calls = Mutex<[Operation: Int]>([:])
    private let queue = DispatchQueue(label: "test.fault-store")

    package init(wrapping base: any AttestStore) {
        self.base = base
    }

    package func set(_ fault: Fault?, for operation: Operation) {
        self.faults.withLock { $0[operation] = fault }
    }

    package func callCount(_ operation: Operation) -> Int {
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

    package func putChallenge(
        _ challenge: String,
        ttlSeconds: Int,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        self.intercept(.putChallenge, completion) {
            self.base.putChallenge(challenge, ttlSeconds: ttlSeconds, completion: completion)
        }
    }
    package func consumeChallenge(
        _ challenge: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        self.intercept(.consumeChallenge, completion) { self.base.consumeChallenge(challenge, completion: completion) }
    }
    package func createKey(
        _ record: KeyRecord, completion: @escaping @Sendable (Result<KeyCreation, StoreError>) -> Void
    ) {
        self.intercept(.createKey, completion) { self.base.createKey(record, completion: completion) }
    }
    package func fetchKey(keyID: String, completion: @escaping @Sendable (Result<KeyRecord?, StoreError>) -> Void) {
        self.intercept(.fetchKey, completion) { self.base.fetchKey(keyID: keyID, completion: completion) }
    }
    package func advanceCounter(
        keyID: String,
        to newCounter: UInt32,
        window: Int,
        completion: @escaping @Sendable (Result<CounterAdvance, StoreError>) -> Void
    ) {
        self.intercept(.advanceCounter, completion) {
            self.base.advanceCounter(keyID: keyID, to: newCounter, window: window, completion: completion)
        }
    }
    package func advanceCounterReadingRisk(
        keyID: String, to newCounter: UInt32, window: Int, lazyRefreshAt: Date?, limits: KeyLimitCharge?,
        completion: @escaping @Sendable (Result<CounterAdvanceReading, StoreError>) -> Void
    ) {
        self.intercept(.advanceCounter, completion) {
            self.base.advanceCounterReadingRisk(
                keyID: keyID, to: newCounter, window: window, lazyRefreshAt: lazyRefreshAt, limits: limits,
                completion: completion)
        }
    }
    package func createDebugToken(
        _ record: DebugTokenRecord, digest: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        self.base.createDebugToken(record, digest: digest, completion: completion)
    }
    package func useDebugToken(
        digest: String, now: Date, completion: @escaping @Sendable (Result<DebugTokenUse, StoreError>) -> Void
    ) {
        self.intercept(.useDebugToken, completion) {
            self.base.useDebugToken(digest: digest, now: now, completion: completion)
        }
    }
    package func listDebugTokens(completion: @escaping @Sendable (Result<[DebugTokenRecord], StoreError>) -> Void) {
        self.base.listDebugTokens(completion: completion)
    }
    package func revokeDebugToken(name: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        self.base.revokeDebugToken(name: name, completion: completion)
    }
    package func revokeKey(keyID: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        self.intercept(.revokeKey, completion) { self.base.revokeKey(keyID: keyID, completion: completion) }
    }
    /// Forwarded as is (no fault of its own to inject).
    package func recordPlayIntegrityVerdict(
        keyID: String, verdict: String, at time: Date,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        self.base.recordPlayIntegrityVerdict(keyID: keyID, verdict: verdict, at: time, completion: completion)
    }
    package func ping(completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        self.intercept(.ping, completion) { self.base.ping(completion: completion) }
    }
    package func sharedSecret(
        name: String, proposed: [UInt8], completion: @escaping @Sendable (Result<[UInt8], StoreError>) -> Void
    ) {
        self.base.sharedSecret(name: name, proposed: proposed, completion: completion)
    }
}

/// Records what a `RequestGate` completed with, and how often.
package final class DecisionProbe: Sendable {
    package init() {}
    private let state = Mutex<(count: Int, first: GateDecision?)>((0, nil))

    package var count: Int { self.state.withLock { $0.count } }

    /// Returns true for the first completion.
    package func record(_ decision: GateDecision) -> Bool {
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

/// Classifies and decides like the proxy does (on a loop, through a promise), waiting for the
/// decision.
package func runGate(
    _ gate: some RequestGate,
    _ head: HTTPRequestHead,
    body: [UInt8]? = nil,
    client: String = "127.0.0.1"
) async -> (GateClassification, GateDecision, DecisionProbe) {
    let classification = gate.classify(head, client: client)
    let probe = DecisionProbe()
    let loop = TestEventLoop.next()
    let decision = await withCheckedContinuation { (continuation: CheckedContinuation<GateDecision, Never>) in
        loop.execute {
            let receiver = GateDecisionRelay { decision in
                if probe.record(decision) {
                    continuation.resume(returning: decision)
                }
            }
            let promise = GateDecisionPromise(loop: loop, receiver: receiver)
            gate.decide(head, body: body, classification: classification, promise: promise)
            promise.askReturned()
        }
    }
    return (classification, decision, probe)
}

extension GateDecision {
    /// The forwarded head, or nil for a local response.
    package var forwardedHead: HTTPRequestHead? {
        if case .forward(let head, _) = self { return head }
        return nil
    }

    package var localResponse: LocalResponse? {
        if case .respond(let response, _) = self { return response }
        return nil
    }

    package var logInfo: GateLogInfo {
        switch self {
        case .forward(_, let info), .respond(_, let info): return info
        }
    }

    /// The JSON body of a local response as a dictionary.
    package var json: [String: Any]? {
        guard let response = self.localResponse else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
    }

    /// `error` of a local JSON error body.
    package var errorCode: String? { self.json?["error"] as? String }

    package var status: Int? { self.localResponse?.status }
}

/// Metrics recorded in memory, to assert on what the gate reports.
package final class RecordingGateMetrics: GateMetrics {
    package init() {}
    package struct Counts: Sendable {
        package var requests: [String: Int] = [:]  // "route|verdict"
        package var attestations: [String: Int] = [:]
        package var challenges = 0
        package var latencies = 0
        package var storeErrors: [String: Int] = [:]  // "operation|kind"
        package var launchValidation: [String: Int] = [:]  // "category|version"
        package var rollout: [String: Int] = [:]  // "route|arm|verdict"
        package var keyLimitRefusals: [String: Int] = [:]  // "route|limit"
        package var fleetAttestations: [String: (perMinute: Int, alerting: Bool)] = [:]  // by App ID
        package var clientReports: [String: Int] = [:]  // "platform|code"
    }
    private let counts = Mutex(Counts())

    package var snapshot: Counts { self.counts.withLock { $0 } }

    package func requestDecided(route: String, verdict: AttestVerdict) {
        self.counts.withLock { $0.requests["\(route)|\(verdict.rawValue)", default: 0] += 1 }
    }
    package func attestation(result: String) {
        self.counts.withLock { $0.attestations[result, default: 0] += 1 }
    }
    package func challengeIssued() {
        self.counts.withLock { $0.challenges += 1 }
    }
    package func verificationLatency(seconds: Double) {
        self.counts.withLock { $0.latencies += 1 }
    }
    package func storeError(operation: String, kind: StoreError.Kind) {
        self.counts.withLock { $0.storeErrors["\(operation)|\(kind.rawValue)", default: 0] += 1 }
    }
    package func limitRefused(limit: String) {
        self.counts.withLock { $0.storeErrors["limit|\(limit)", default: 0] += 1 }
    }
    package func launchValidation(category: UInt32?, bundleVersion: String?) {
        let key = "\(category.map(String.init) ?? "none")|\(bundleVersion ?? "none")"
        self.counts.withLock { $0.launchValidation[key, default: 0] += 1 }
    }
    package func rolloutDecided(route: String, arm: RolloutArm, verdict: AttestVerdict) {
        self.counts.withLock { $0.rollout["\(route)|\(arm.rawValue)|\(verdict.rawValue)", default: 0] += 1 }
    }
    package func keyLimitRefused(route: String, limit: KeyLimitKind) {
        self.counts.withLock { $0.keyLimitRefusals["\(route)|\(limit.rawValue)", default: 0] += 1 }
    }
    package func fleetAttestations(appID: String, perMinute: Int, alerting: Bool) {
        self.counts.withLock { $0.fleetAttestations[appID] = (perMinute, alerting) }
    }
    package func clientReportedFailure(platform: String, code: String) {
        self.counts.withLock { $0.clientReports["\(platform)|\(code)", default: 0] += 1 }
    }
}

package func request(
    _ method: String,
    _ target: String,
    headers: [(String, String)] = []
) -> HTTPRequestHead {
    HTTPRequestHead(method: method, target: target, headers: HTTPHeaders([("Host", "api.example")] + headers))
}

/// A clock for MemoryStore's challenge expiry that tests move by hand.
package final class ManualClock: Sendable {
    package init() {}
    private let base = ContinuousClock.now
    private let offset = Mutex<Duration>(.zero)

    package func now() -> ContinuousClock.Instant { self.base + self.offset.withLock { $0 } }
    package func advance(by duration: Duration) { self.offset.withLock { $0 += duration } }
    /// Wall-clock time moved by the same offset (the gate's `now`: challenge expiry).
    package func date() -> Date {
        let (seconds, attoseconds) = self.offset.withLock { $0 }.components
        return Date().addingTimeInterval(Double(seconds) + Double(attoseconds) / 1e18)
    }
}
