import Foundation
import Testing

@testable import HTTP1
@testable import KeyStore
@testable import RedisClient

/// `counter_window: N`: out-of-order counters within the window pass exactly once, in
/// `CounterWindow` (the model) and in both stores (the Lua script in Redis).
@Suite(.timeLimit(.minutes(2))) struct CounterWindowTests {
    /// An oracle written from the rule alone (a set of accepted counters, no bitmap): `c`
    /// passes iff `c > h`, or `h - N < c <= h` and `c` was not accepted before.
    struct Oracle {
        let size: Int
        var highest: UInt32
        var accepted: Set<UInt32> = []

        mutating func admit(_ c: UInt32) -> Bool {
            let passes: Bool
            if c > self.highest {
                passes = true
            } else if self.size == 0 {
                passes = false
            } else {
                passes =
                    c >= 1 && Int64(c) > Int64(self.highest) - Int64(self.size) && !self.accepted.contains(c)
                    && c != self.highest
            }
            if passes {
                self.accepted.insert(c)
                self.highest = max(self.highest, c)
            }
            return passes
        }
    }

    // MARK: The model

    @Test func modelFollowsTheRule() {
        var window = CounterWindow(highest: 0, seen: nil, size: 4)
        #expect(window.admit(3) == .advanced)
        #expect(window.admit(1) == .acceptedOutOfOrder)
        #expect(window.admit(1) == .refused, "seen")
        #expect(window.admit(3) == .refused, "the highest is seen")
        #expect(window.admit(2) == .acceptedOutOfOrder)
        #expect(window.admit(9) == .advanced)
        #expect(window.admit(5) == .refused, "9 - 4 = 5 is outside the window")
        #expect(window.admit(6) == .acceptedOutOfOrder)
        #expect(window.admit(0) == .refused)
        #expect(String(decoding: window.seen, as: UTF8.self) == "1001")
    }

    @Test func unknownHistoryCountsAsSeen() {
        // A key used under the strict rule up to 10, now with a window: 7...9 are unknown.
        var window = CounterWindow(highest: 10, seen: nil, size: 4)
        for c: UInt32 in [7, 8, 9, 10] { #expect(window.admit(c) == .refused, "\(c)") }
        #expect(window.admit(12) == .advanced)
        #expect(window.admit(11) == .acceptedOutOfOrder, "11 came after the window was known")
        #expect(window.admit(10) == .refused)
        // A smaller stored map grown to a larger window: the new positions count as seen.
        var grown = CounterWindow(highest: 20, seen: Array("10".utf8), size: 4)
        #expect(grown.admit(19) == .acceptedOutOfOrder)
        #expect(grown.admit(18) == .refused)
        #expect(grown.admit(17) == .refused)
    }

    @Test(arguments: [1, 2, 8, 63, 64, 100])
    func modelAgreesWithTheOracleOnShuffledCounters(size: Int) {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            let counters =
                (1...UInt32(150)).map { $0 }.shuffled(using: &generator)
                + (1...20).map { _ in UInt32.random(in: 1...160) }
            var model = CounterWindow(highest: 0, seen: nil, size: size)
            var oracle = Oracle(size: size, highest: 0)
            for c in counters {
                #expect((model.admit(c) != .refused) == oracle.admit(c), "size \(size), counter \(c)")
            }
        }
    }

    // MARK: Both stores

    @Test(arguments: StoreKind.allCases)
    func sixtyFourParallelAssertionsAllPassWithWindow64(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            let record = sampleRecord(counter: 10)
            #expect(await store.createKey(record).value == .created)
            let counters = (11...74).map { UInt32($0) }.shuffled()
            for c in counters {
                let result = await store.advanceCounter(keyID: record.keyID, to: c, window: 64).value
                #expect(
                    result == .advanced || result == .acceptedOutOfOrder, "counter \(c): \(String(describing: result))")
            }
            // Every accepted one, replayed, is refused.
            for c in counters {
                #expect(
                    await store.advanceCounter(keyID: record.keyID, to: c, window: 64).value
                        == .notIncreasing(stored: 74), "replay of \(c)")
            }
            let fetched = try #require(await store.fetchKey(keyID: record.keyID).value ?? nil)
            #expect(fetched.counter == 74)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func smallerWindowRefusesExactlyTheOnesTooFarBehind(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            for size in [1, 8, 16, 32] {
                let record = sampleRecord(counter: 0)
                #expect(await store.createKey(record).value == .created)
                let counters = (1...64).map { UInt32($0) }.shuffled()
                var oracle = Oracle(size: size, highest: 0)
                var refused = 0
                for c in counters {
                    let result = await store.advanceCounter(keyID: record.keyID, to: c, window: size).value
                    let expected = oracle.admit(c)
                    #expect((result == .advanced || result == .acceptedOutOfOrder) == expected, "N=\(size) c=\(c)")
                    if !expected {
                        refused += 1
                        #expect(result == .notIncreasing(stored: oracle.highest))
                    }
                }
                // Replays of everything that passed are refused.
                for c in oracle.accepted {
                    let replay = await store.advanceCounter(keyID: record.keyID, to: c, window: size).value
                    #expect(replay == .notIncreasing(stored: 64), "N=\(size) replay \(c)")
                }
                #expect(oracle.accepted.count + refused == 64)
            }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func strictAfterWindowedForgetsTheMapSafely(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            let record = sampleRecord(counter: 0)
            #expect(await store.createKey(record).value == .created)
            #expect(await store.advanceCounter(keyID: record.keyID, to: 10, window: 8).value == .advanced)
            #expect(await store.advanceCounter(keyID: record.keyID, to: 12, window: 0).value == .advanced)
            // Back to a window: what happened under the strict rule is unknown, so refused.
            #expect(
                await store.advanceCounter(keyID: record.keyID, to: 11, window: 8).value == .notIncreasing(stored: 12))
            #expect(await store.advanceCounter(keyID: record.keyID, to: 14, window: 8).value == .advanced)
            #expect(await store.advanceCounter(keyID: record.keyID, to: 13, window: 8).value == .acceptedOutOfOrder)
            #expect(
                await store.advanceCounter(keyID: record.keyID, to: 13, window: 8).value == .notIncreasing(stored: 14))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func revokedAndUnknownKeysUnderAWindow(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            #expect(await store.advanceCounter(keyID: randomToken("none-"), to: 1, window: 8).value == .unknownKey)
            let record = sampleRecord(counter: 5)
            #expect(await store.createKey(record).value == .created)
            #expect(await store.revokeKey(keyID: record.keyID).value == true)
            #expect(await store.advanceCounter(keyID: record.keyID, to: 4, window: 8).value == .revoked)
        }
    }

    // MARK: Races on Redis (4 connections, one key)

    /// 1,000 copies of one counter inside the window, from four connections at once: exactly
    /// one is accepted (the seen-map is read and set in the same script).
    @Test(arguments: [UInt32(60), UInt32(101)])
    func thousandConcurrentCopiesOfOneWindowedCounterLetExactlyOneThrough(counter: UInt32) async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let url = try RedisURL(parsing: server.urlString())
        let stores = (0..<4).map { RedisStore(url: url, label: "window-race-\($0)") }
        defer { stores.forEach { $0.close() } }
        for store in stores { #expect(await waitUntilReachable(store)) }
        let record = sampleRecord(counter: 0)
        #expect(await stores[0].createKey(record).value == .created)
        #expect(await stores[0].advanceCounter(keyID: record.keyID, to: 100, window: 64).value == .advanced)

        let results: [Result<CounterAdvance, StoreError>] = await concurrently(1000) { index, done in
            stores[index % stores.count].advanceCounter(keyID: record.keyID, to: counter, window: 64, completion: done)
        }
        #expect(results.allSatisfy { $0.error == nil })
        let expected: CounterAdvance = counter > 100 ? .advanced : .acceptedOutOfOrder
        #expect(results.filter { $0.value == expected }.count == 1)
        let stored = max(counter, 100)
        #expect(results.filter { $0.value == .notIncreasing(stored: stored) }.count == 999)
    }

    /// 64 distinct counters × 16 copies each, shuffled, all at once: each counter passes once.
    @Test func shuffledParallelCopiesPassOncePerCounter() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let url = try RedisURL(parsing: server.urlString())
        let stores = (0..<4).map { RedisStore(url: url, label: "window-shuffle-\($0)") }
        defer { stores.forEach { $0.close() } }
        for store in stores { #expect(await waitUntilReachable(store)) }
        let record = sampleRecord(counter: 0)
        #expect(await stores[0].createKey(record).value == .created)
        let sends = (1...64).flatMap { c in [UInt32](repeating: UInt32(c), count: 16) }.shuffled()
        let results: [Result<CounterAdvance, StoreError>] = await concurrently(sends.count) { index, done in
            stores[index % stores.count].advanceCounter(
                keyID: record.keyID, to: sends[index], window: 64, completion: done)
        }
        var passes: [UInt32: Int] = [:]
        for (index, result) in results.enumerated() {
            if result.value == .advanced || result.value == .acceptedOutOfOrder {
                passes[sends[index], default: 0] += 1
            }
        }
        #expect(passes.count == 64, "every counter once")
        #expect(passes.values.allSatisfy { $0 == 1 })
    }
}
