import Foundation
import GatewayTesting
import Testing

@testable import HTTP1
@testable import KeyStore
@testable import RedisClient

/// `counter_window: N` in both stores (the Lua script in Redis): out-of-order counters within the
/// window pass exactly once, against `CounterWindowOracle` (the model: `CounterWindowTests`).
@Suite(.timeLimit(.minutes(2))) struct CounterWindowStoreTests {
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
                var oracle = CounterWindowOracle(size: size, highest: 0)
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
