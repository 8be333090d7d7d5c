import Foundation
import GatewayTesting
import Testing

@testable import HTTP1
@testable import KeyStore

/// One behaviour, two stores: every test runs against `MemoryStore` and against
/// `RedisStore` on a real redis-server (loopback, its own process per test).
@Suite(.timeLimit(.minutes(1))) struct StoreConformanceTests {
    @Test(arguments: StoreKind.allCases)
    func challengeIsStoredOnceAndConsumedOnce(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            let challenge = randomToken("ch-")
            #expect(await store.putChallenge(challenge, ttlSeconds: 300).value == true)
            #expect(
                await store.putChallenge(challenge, ttlSeconds: 300).value == false,
                "a second put must not overwrite"
            )
            #expect(await store.consumeChallenge(challenge).value == true)
            #expect(await store.consumeChallenge(challenge).value == false, "one use only")
            #expect(await store.consumeChallenge(randomToken("never-")).value == false)
            // After consumption the same value may be issued again.
            #expect(await store.putChallenge(challenge, ttlSeconds: 300).value == true)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func challengeExpiresAfterItsTTL(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            let short = randomToken("short-")
            let long = randomToken("long-")
            #expect(await store.putChallenge(short, ttlSeconds: 1).value == true)
            #expect(await store.putChallenge(long, ttlSeconds: 60).value == true)
            try await Task.sleep(for: .milliseconds(1300))
            #expect(await store.consumeChallenge(short).value == false, "expired after 1 s")
            #expect(await store.consumeChallenge(long).value == true)
            // An expired challenge does not block a new put of the same value.
            #expect(await store.putChallenge(short, ttlSeconds: 60).value == true)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func createFetchAndAlreadyExists(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            let record = sampleRecord(counter: 0)
            #expect(await store.fetchKey(keyID: record.keyID).value == .some(nil))
            #expect(await store.createKey(record).value == .created)
            var other = record
            other.appID = "OTHER12345.com.example.other"
            other.publicKey = [0x04] + [UInt8](repeating: 9, count: 64)
            #expect(await store.createKey(other).value == .alreadyExists)
            let fetched = try #require(await store.fetchKey(keyID: record.keyID).value ?? nil)
            #expect(fetched == record, "the first record stays, byte for byte")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func attestedAtKeepsWholeSeconds(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            var record = sampleRecord()
            record.attestedAt = Date(timeIntervalSince1970: 1_763_000_000.75)
            #expect(await store.createKey(record).value == .created)
            let fetched = try #require(await store.fetchKey(keyID: record.keyID).value ?? nil)
            #expect(fetched.attestedAt == Date(timeIntervalSince1970: 1_763_000_000))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func advanceCounterComparesAndSets(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            let record = sampleRecord(counter: 0)
            #expect(await store.createKey(record).value == .created)
            #expect(await store.advanceCounter(keyID: record.keyID, to: 1).value == .advanced)
            #expect(await store.advanceCounter(keyID: record.keyID, to: 5).value == .advanced)
            #expect(await store.advanceCounter(keyID: record.keyID, to: 5).value == .notIncreasing(stored: 5))
            #expect(await store.advanceCounter(keyID: record.keyID, to: 3).value == .notIncreasing(stored: 5))
            #expect(await store.advanceCounter(keyID: record.keyID, to: UInt32.max).value == .advanced)
            #expect(
                await store.advanceCounter(keyID: record.keyID, to: UInt32.max).value
                    == .notIncreasing(stored: UInt32.max)
            )
            let fetched = try #require(await store.fetchKey(keyID: record.keyID).value ?? nil)
            #expect(fetched.counter == UInt32.max)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func advanceCounterOfUnknownKey(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            #expect(await store.advanceCounter(keyID: randomToken("missing-"), to: 1).value == .unknownKey)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func revokeStopsTheCounter(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            let record = sampleRecord(counter: 3)
            #expect(await store.revokeKey(keyID: record.keyID).value == false, "no such key yet")
            #expect(await store.createKey(record).value == .created)
            #expect(await store.revokeKey(keyID: record.keyID).value == true)
            #expect(await store.advanceCounter(keyID: record.keyID, to: 4).value == .revoked)
            let fetched = try #require(await store.fetchKey(keyID: record.keyID).value ?? nil)
            #expect(fetched.status == .revoked)
            #expect(fetched.counter == 3, "a revoked key's counter does not move")
            #expect(await store.revokeKey(keyID: record.keyID).value == true, "revoking twice is fine")
            #expect(await store.createKey(record).value == .alreadyExists, "a revoked key cannot be re-attested")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func pingAnswers(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            #expect(await store.ping().error == nil)
        }
    }
}
