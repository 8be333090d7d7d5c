// The store's test helpers that need no server, for the unit and the integration tests:
// async bridges over the completion-handler API, sample records, concurrent starts.
package import Foundation
package import KeyStore
package import RedisClient

/// Async bridges over the completion-handler store API (tests only).
extension AttestStore {
    package func putChallenge(_ challenge: String, ttlSeconds: Int) async -> Result<Bool, StoreError> {
        await withCheckedContinuation { c in
            self.putChallenge(challenge, ttlSeconds: ttlSeconds) { c.resume(returning: $0) }
        }
    }
    package func consumeChallenge(_ challenge: String) async -> Result<Bool, StoreError> {
        await withCheckedContinuation { c in self.consumeChallenge(challenge) { c.resume(returning: $0) } }
    }
    package func createKey(_ record: KeyRecord) async -> Result<KeyCreation, StoreError> {
        await withCheckedContinuation { c in self.createKey(record) { c.resume(returning: $0) } }
    }
    package func fetchKey(keyID: String) async -> Result<KeyRecord?, StoreError> {
        await withCheckedContinuation { c in self.fetchKey(keyID: keyID) { c.resume(returning: $0) } }
    }
    package func advanceCounter(keyID: String, to counter: UInt32) async -> Result<CounterAdvance, StoreError> {
        await withCheckedContinuation { c in self.advanceCounter(keyID: keyID, to: counter) { c.resume(returning: $0) }
        }
    }
    package func advanceCounter(keyID: String, to counter: UInt32, window: Int) async -> Result<
        CounterAdvance, StoreError
    > {
        await withCheckedContinuation { c in
            self.advanceCounter(keyID: keyID, to: counter, window: window) { c.resume(returning: $0) }
        }
    }
    package func advanceCounter(
        keyID: String, to counter: UInt32, window: Int = 0, limits: KeyLimitCharge
    ) async -> Result<CounterAdvance, StoreError> {
        await withCheckedContinuation { c in
            self.advanceCounterReadingRisk(
                keyID: keyID, to: counter, window: window, lazyRefreshAt: nil, limits: limits
            ) { c.resume(returning: $0.map(\.advance)) }
        }
    }
    package func createDebugToken(_ record: DebugTokenRecord, digest: String) async -> Result<Bool, StoreError> {
        await withCheckedContinuation { c in self.createDebugToken(record, digest: digest) { c.resume(returning: $0) } }
    }
    package func useDebugToken(digest: String, now: Date) async -> Result<DebugTokenUse, StoreError> {
        await withCheckedContinuation { c in self.useDebugToken(digest: digest, now: now) { c.resume(returning: $0) } }
    }
    package func listDebugTokens() async -> Result<[DebugTokenRecord], StoreError> {
        await withCheckedContinuation { c in self.listDebugTokens { c.resume(returning: $0) } }
    }
    package func revokeDebugToken(name: String) async -> Result<Bool, StoreError> {
        await withCheckedContinuation { c in self.revokeDebugToken(name: name) { c.resume(returning: $0) } }
    }
    package func revokeKey(keyID: String) async -> Result<Bool, StoreError> {
        await withCheckedContinuation { c in self.revokeKey(keyID: keyID) { c.resume(returning: $0) } }
    }
    package func ping() async -> Result<Void, StoreError> {
        await withCheckedContinuation { c in self.ping { c.resume(returning: $0) } }
    }
}

package func randomToken(_ prefix: String = "") -> String {
    prefix + (0..<16).map { _ in String(UInt8.random(in: 0...255), radix: 16) }.joined()
}

package func sampleRecord(keyID: String = randomToken("key-"), counter: UInt32 = 0) -> KeyRecord {
    KeyRecord(
        keyID: keyID,
        publicKey: [0x04] + (0..<64).map { UInt8($0) },
        counter: counter,
        appID: "ABCDE12345.com.example.app",
        environment: "production",
        // Every byte value, including NUL and invalid UTF-8: the receipt is binary.
        receipt: (0...255).map { UInt8($0) } + [0, 0, 0xFF],
        attestedAt: Date(timeIntervalSince1970: 1_763_000_000),
        status: .active
    )
}

extension Result {
    package var value: Success? {
        if case .success(let v) = self { return v }
        return nil
    }
    package var error: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
    package var failure: Failure? { self.error }
}

/// Runs `count` operations started as close together as possible (from several threads at
/// once) and returns their results in index order.
package func concurrently<T: Sendable>(
    _ count: Int,
    _ operation: @escaping @Sendable (Int, @escaping @Sendable (T) -> Void) -> Void
) async -> [T] {
    let results = ResultBox<T>(count: count)
    return await withCheckedContinuation { continuation in
        let group = DispatchGroup()
        for _ in 0..<count { group.enter() }
        group.notify(queue: .global()) { continuation.resume(returning: results.values) }
        DispatchQueue.concurrentPerform(iterations: count) { index in
            operation(index) { value in
                results.set(index, value)
                group.leave()
            }
        }
    }
}

package final class ResultBox<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var slots: [T?]
    package init(count: Int) { self.slots = Array(repeating: nil, count: count) }
    package func set(_ index: Int, _ value: T) {
        self.lock.lock()
        self.slots[index] = value
        self.lock.unlock()
    }
    package var values: [T] {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.slots.compactMap { $0 }
    }
}
