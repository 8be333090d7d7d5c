import Foundation
import GatewayTesting
import Testing

@testable import HTTP1
@testable import KeyStore
@testable import RedisClient

/// N gateways racing on one key: the compare-and-set and the one-use challenge hold across
/// connections, because each is one atomic step on the server.
@Suite(.timeLimit(.minutes(1))) struct StoreAtomicityTests {
    static let racers = 200

    @Test func concurrentAdvanceToTheSameCounterLetsExactlyOneThrough() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let url = try RedisURL(parsing: server.urlString())
        let stores = (0..<4).map { RedisStore(url: url, label: "atomicity-\($0)") }
        defer { stores.forEach { $0.close() } }
        for store in stores { #expect(await waitUntilReachable(store)) }

        let record = sampleRecord(counter: 6)
        #expect(await stores[0].createKey(record).value == .created)
        let results: [Result<CounterAdvance, StoreError>] = await concurrently(Self.racers) { index, done in
            stores[index % stores.count].advanceCounter(keyID: record.keyID, to: 7, completion: done)
        }
        #expect(results.count == Self.racers)
        #expect(results.filter { $0.value == .advanced }.count == 1)
        #expect(results.filter { $0.value == .notIncreasing(stored: 7) }.count == Self.racers - 1)
        #expect(results.allSatisfy { $0.error == nil })
    }

    @Test func concurrentConsumeOfOneChallengeSucceedsOnce() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let url = try RedisURL(parsing: server.urlString())
        let stores = (0..<4).map { RedisStore(url: url, label: "atomicity-\($0)") }
        defer { stores.forEach { $0.close() } }
        for store in stores { #expect(await waitUntilReachable(store)) }

        for round in 0..<3 {
            let challenge = randomToken("race-\(round)-")
            #expect(await stores[round % stores.count].putChallenge(challenge, ttlSeconds: 60).value == true)
            let results: [Result<Bool, StoreError>] = await concurrently(Self.racers) { index, done in
                stores[index % stores.count].consumeChallenge(challenge, completion: done)
            }
            #expect(results.filter { $0.value == true }.count == 1)
            #expect(results.filter { $0.value == false }.count == Self.racers - 1)
        }
    }

    @Test func distinctIncreasingCountersEndAtTheHighest() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let url = try RedisURL(parsing: server.urlString())
        let stores = (0..<4).map { RedisStore(url: url, label: "atomicity-\($0)") }
        defer { stores.forEach { $0.close() } }
        let record = sampleRecord(counter: 0)
        #expect(await stores[0].createKey(record).value == .created)
        let results: [Result<CounterAdvance, StoreError>] = await concurrently(Self.racers) { index, done in
            stores[index % stores.count].advanceCounter(keyID: record.keyID, to: UInt32(index + 1), completion: done)
        }
        #expect(results.allSatisfy { $0.error == nil })
        #expect(results.contains { $0.value == .advanced })
        // Whatever the interleaving, the stored counter ends at the maximum and never went back.
        let fetched = try #require(await stores[1].fetchKey(keyID: record.keyID).value ?? nil)
        #expect(fetched.counter == UInt32(Self.racers))
        for case .success(.notIncreasing(let stored)) in results { #expect(stored >= 1) }
    }

    @Test func memoryStoreHoldsTheSameGuarantees() async throws {
        let store = MemoryStore()
        let record = sampleRecord(counter: 6)
        #expect(await store.createKey(record).value == .created)
        let advances: [Result<CounterAdvance, StoreError>] = await concurrently(Self.racers) { _, done in
            store.advanceCounter(keyID: record.keyID, to: 7, completion: done)
        }
        #expect(advances.filter { $0.value == .advanced }.count == 1)
        let challenge = randomToken()
        #expect(await store.putChallenge(challenge, ttlSeconds: 60).value == true)
        let consumes: [Result<Bool, StoreError>] = await concurrently(Self.racers) { _, done in
            store.consumeChallenge(challenge, completion: done)
        }
        #expect(consumes.filter { $0.value == true }.count == 1)
    }
}
