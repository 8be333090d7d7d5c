import Foundation
import GatewayTesting
import RedisClient
import Testing

@testable import KeyStore

/// The Play Integrity verdict on the key record, memory and Redis alike: written at creation,
/// replaced by `recordPlayIntegrityVerdict` (whole seconds, nothing else of the record
/// touched), refused for an unknown or revoked key.
@Suite(.timeLimit(.minutes(1))) struct PlayIntegrityVerdictStoreTests {
    static func record(
        _ store: any AttestStore, _ keyID: String, _ verdict: String, _ time: Date
    ) async -> Result<Bool, StoreError> {
        await withCheckedContinuation { continuation in
            store.recordPlayIntegrityVerdict(keyID: keyID, verdict: verdict, at: time) {
                continuation.resume(returning: $0)
            }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func theVerdictAndItsTimeAreKeptAndReplaced(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            var record = sampleRecord(counter: 3)
            record.platform = KeyRecord.androidPlatform
            record.playIntegrityVerdict = KeyRecord.playIntegrityVerified
            record.playIntegrityVerifiedAt = Date(timeIntervalSince1970: 1_790_000_000)
            #expect(await store.createKey(record).value == .created)
            var fetched = try #require(await store.fetchKey(keyID: record.keyID).value ?? nil)
            #expect(fetched == record)

            let later = Date(timeIntervalSince1970: 1_790_007_200.75)
            #expect(try await Self.record(store, record.keyID, KeyRecord.playIntegrityUnverified, later).get())
            fetched = try #require(await store.fetchKey(keyID: record.keyID).value ?? nil)
            #expect(fetched.playIntegrityVerdict == KeyRecord.playIntegrityUnverified)
            #expect(fetched.playIntegrityVerifiedAt == Date(timeIntervalSince1970: 1_790_007_200))
            var rest = fetched
            rest.playIntegrityVerdict = record.playIntegrityVerdict
            rest.playIntegrityVerifiedAt = record.playIntegrityVerifiedAt
            #expect(rest == record, "nothing else of the record changed")

            #expect(try await Self.record(store, randomToken("none-"), "verified", later).get() == false)
            #expect(await store.revokeKey(keyID: record.keyID).value == true)
            #expect(try await Self.record(store, record.keyID, "verified", later).get() == false)

            // A key without a verdict reads as none.
            let plain = sampleRecord()
            #expect(await store.createKey(plain).value == .created)
            let read = try #require(await store.fetchKey(keyID: plain.keyID).value ?? nil)
            #expect(read.playIntegrityVerdict == nil && read.playIntegrityVerifiedAt == nil)
        }
    }
}
