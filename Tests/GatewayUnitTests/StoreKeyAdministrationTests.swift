import Foundation
import GatewayTesting
import Testing

@testable import HTTP1
@testable import KeyStore
@testable import PolicyModel
@testable import RedisClient

/// What `keys show` / `keys revoke` rely on.
@Suite struct StoreKeyAdministrationTests {
    @Test func keyIDsAreCanonicalised() {
        let standard = Data((0..<32).map { UInt8(truncatingIfNeeded: $0 * 7 + 250) }).base64EncodedString()
        #expect(KeyAdministration.canonicalKeyID(standard) == standard)
        let urlSafe = standard.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        #expect(urlSafe != standard)
        #expect(KeyAdministration.canonicalKeyID(urlSafe) == standard)
        #expect(KeyAdministration.canonicalKeyID("  \(standard) ") == standard)
        #expect(KeyAdministration.canonicalKeyID("%%%") == nil)
        #expect(KeyAdministration.canonicalKeyID("A") == nil)
        #expect(KeyAdministration.canonicalKeyID("") == nil)
    }

    @Test func rendersOneJSONObject() throws {
        let record = sampleRecord(keyID: "a2V5", counter: 12)
        let text = KeyAdministration.json(record)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(object["key_id"] as? String == "a2V5")
        #expect(object["app_id"] as? String == "ABCDE12345.com.example.app")
        #expect(object["environment"] as? String == "production")
        #expect(object["counter"] as? Int == 12)
        #expect(object["status"] as? String == "active")
        #expect(object["attested_at"] as? String == "2025-11-13T02:13:20Z")
        #expect(object["public_key"] as? String == Data(record.publicKey).base64EncodedString())
        #expect(object["receipt_bytes"] as? Int == record.receipt.count)
        #expect(object.count == 8)
        #expect(!text.contains("\n"))
    }

    /// An Android key of an app with `play_integrity:` shows its platform, verdict and when the
    /// verdict was accepted (`keys show`).
    @Test func anAndroidKeyShowsItsPlayIntegrityVerdict() throws {
        var record = sampleRecord(keyID: "a2V5", counter: 3)
        record.platform = KeyRecord.androidPlatform
        record.playIntegrityVerdict = KeyRecord.playIntegrityUnverified
        record.playIntegrityVerifiedAt = Date(timeIntervalSince1970: 1_763_000_000)
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(KeyAdministration.json(record).utf8)) as? [String: Any])
        #expect(object["platform"] as? String == "android")
        #expect(object["play_integrity"] as? String == "unverified")
        #expect(object["play_integrity_verified_at"] as? String == "2025-11-13T02:13:20Z")
    }

    @Test func blockingCallsReturnTheStoreResult() throws {
        let store = MemoryStore()
        let record = sampleRecord()
        let created = DispatchSemaphore(value: 0)
        store.createKey(record) { _ in created.signal() }
        created.wait()
        #expect(try KeyAdministration.fetch(store, keyID: record.keyID, timeout: .seconds(2)) == record)
        #expect(try KeyAdministration.fetch(store, keyID: "other", timeout: .seconds(2)) == nil)
        #expect(try KeyAdministration.revoke(store, keyID: record.keyID, timeout: .seconds(2)) == true)
        #expect(try KeyAdministration.revoke(store, keyID: "other", timeout: .seconds(2)) == false)
        #expect(try KeyAdministration.fetch(store, keyID: record.keyID, timeout: .seconds(2))?.status == .revoked)
    }

    @Test func blockingCallsGiveUpAfterTheirTimeout() {
        #expect {
            try KeyAdministration.fetch(SilentStore(), keyID: "k", timeout: .milliseconds(50))
        } throws: { ($0 as? StoreError)?.kind == .timeout }
    }
}

/// A store that never answers (tests the CLI's own bound on waiting).
private final class SilentStore: AttestStore {
    func putChallenge(_ c: String, ttlSeconds: Int, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void)
    {}
    func consumeChallenge(_ c: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {}
    func createKey(_ r: KeyRecord, completion: @escaping @Sendable (Result<KeyCreation, StoreError>) -> Void) {}
    func fetchKey(keyID: String, completion: @escaping @Sendable (Result<KeyRecord?, StoreError>) -> Void) {}
    func advanceCounter(
        keyID: String,
        to n: UInt32,
        window: Int,
        completion: @escaping @Sendable (Result<CounterAdvance, StoreError>) -> Void
    ) {}
    func createDebugToken(
        _ r: DebugTokenRecord, digest: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {}
    func useDebugToken(
        digest: String, now: Date, completion: @escaping @Sendable (Result<DebugTokenUse, StoreError>) -> Void
    ) {}
    func listDebugTokens(completion: @escaping @Sendable (Result<[DebugTokenRecord], StoreError>) -> Void) {}
    func revokeDebugToken(name: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {}
    func revokeKey(keyID: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {}
    func ping(completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {}
    func sharedSecret(
        name: String, proposed: [UInt8], completion: @escaping @Sendable (Result<[UInt8], StoreError>) -> Void
    ) {}
}

@Suite struct StoreFactoryTests {
    @Test func buildsTheStoreThePolicyNames() throws {
        #expect(try AttestStoreFactory.make(.memory) is MemoryStore)
        let redis = try #require(try AttestStoreFactory.make(.redis(url: "redis://127.0.0.1:1/0")) as? RedisStore)
        #expect(redis.connection.url.address == .tcp(host: "127.0.0.1", port: 1))
        redis.close()
        #expect(throws: RedisURLError.self) { try AttestStoreFactory.make(.redis(url: "http://nope")) }
    }
}
