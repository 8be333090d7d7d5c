import Foundation
import GatewayTesting
import Synchronization
import Testing

@testable import HTTP1
@testable import KeyStore
@testable import RedisClient

/// The store's pure parts, without sockets or a server.
@Suite struct StoreUnitTests {
    @Test func deadlineQueueExpiresOldestFirstAndKeepsExpiredUntilTheirReply() {
        var queue = DeadlineQueue<String>()
        queue.append("a", deadline: 10)
        queue.append("b", deadline: 20)
        queue.append("c", deadline: 30)
        #expect(queue.nextDeadline == 10)
        #expect(queue.expire(now: 9).isEmpty)
        #expect(queue.expire(now: 20) == ["a", "b"])
        #expect(queue.expire(now: 25).isEmpty, "each entry expires once")
        #expect(queue.count == 3 && queue.liveCount == 1)
        #expect(queue.nextDeadline == 30)
        #expect(queue.oldestDeadline == 10)
        let first = queue.popFirst()
        #expect(first?.element == "a" && first?.wasExpired == true)
        let second = queue.popFirst()
        #expect(second?.element == "b" && second?.wasExpired == true)
        let third = queue.popFirst()
        #expect(third?.element == "c" && third?.wasExpired == false)
        #expect(queue.popFirst() == nil)
        #expect(queue.isEmpty && queue.nextDeadline == nil && queue.oldestDeadline == nil)
    }

    @Test func deadlineQueueStaysConsistentOverManyEntries() {
        var queue = DeadlineQueue<Int>()
        var expectedHead = 0
        for i in 0..<5000 {
            queue.append(i, deadline: UInt64(i))
            if i % 3 == 0 { _ = queue.expire(now: UInt64(i / 2)) }
            if i % 2 == 1 {
                #expect(queue.popFirst()?.element == expectedHead)
                expectedHead += 1
            }
        }
        #expect(queue.count == 5000 - expectedHead)
        #expect(queue.removeAll() == Array(expectedHead..<5000))
        #expect(queue.isEmpty && queue.liveCount == 0)
    }

    @Test func backoffDoublesUpToTheCapAndResets() {
        var backoff = ReconnectBackoff(initial: .milliseconds(50), maximum: .seconds(1), jitter: { 1.0 })
        let delays = (0..<7).map { _ in backoff.nextDelay() }
        #expect(
            delays == [
                .milliseconds(50), .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800),
                .seconds(1), .seconds(1),
            ]
        )
        backoff.reset()
        #expect(backoff.nextDelay() == .milliseconds(50))
    }

    @Test func backoffJitterOnlyShortens() {
        var backoff = ReconnectBackoff(initial: .milliseconds(100), maximum: .seconds(2))
        for _ in 0..<50 {
            let delay = backoff.nextDelay()
            #expect(delay <= .seconds(2))
            #expect(delay >= .milliseconds(75))
        }
    }

    @Test(arguments: [
        ("", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        ("abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "84983e441c3bd26ebaae4aa1f95129e5e54670f1"),
        (String(repeating: "a", count: 1000), "291e9a6c66994949b57ba5e650361e98fc36b1ba"),
    ])
    func sha1KnownAnswers(input: String, digest: String) {
        #expect(SHA1.hexDigest(input) == digest)
    }

    @Test func decodesAKeyRecordReply() throws {
        let reply = Self.hash([
            "public_key": [4, 1, 2], "counter": Array("42".utf8), "app_id": Array("T.b".utf8),
            "environment": Array("development".utf8), "receipt": [0, 255], "attested_at": Array("1700000000".utf8),
            "status": Array("revoked".utf8),
        ])
        let record = try #require(try RedisStore.decodeKeyRecord(keyID: "k", reply: reply))
        #expect(
            record
                == KeyRecord(
                    keyID: "k",
                    publicKey: [4, 1, 2],
                    counter: 42,
                    appID: "T.b",
                    environment: "development",
                    receipt: [0, 255],
                    attestedAt: Date(timeIntervalSince1970: 1_700_000_000),
                    status: .revoked
                )
        )
        #expect(try RedisStore.decodeKeyRecord(keyID: "k", reply: .array([])) == nil)
    }

    @Test(arguments: [
        ("counter", Array("-1".utf8)), ("counter", Array("4294967296".utf8)), ("counter", Array("x".utf8)),
        ("attested_at", Array("soon".utf8)), ("status", Array("paused".utf8)),
    ])
    func rejectsACorruptKeyRecord(field: String, value: [UInt8]) {
        var fields: [String: [UInt8]] = [
            "public_key": [4], "counter": Array("1".utf8), "app_id": Array("a".utf8),
            "environment": Array("production".utf8),
            "receipt": [], "attested_at": Array("1".utf8), "status": Array("active".utf8),
        ]
        fields[field] = value
        #expect {
            try RedisStore.decodeKeyRecord(keyID: "k", reply: Self.hash(fields))
        } throws: { error in
            (error as? StoreError)?.kind == .protocolError && (error as? StoreError)?.reason.contains(field) == true
        }
    }

    @Test func rejectsMalformedHashReplies() {
        #expect(throws: StoreError.self) { try RedisStore.decodeKeyRecord(keyID: "k", reply: .array([.bulk([1])])) }
        #expect(throws: StoreError.self) { try RedisStore.decodeKeyRecord(keyID: "k", reply: .status("OK")) }
        #expect(throws: StoreError.self) {
            try RedisStore.decodeKeyRecord(keyID: "k", reply: .array([.bulk(Array("counter".utf8)), .integer(1)]))
        }
        // A hash missing a field (someone wrote it by hand).
        #expect(throws: StoreError.self) {
            try RedisStore.decodeKeyRecord(keyID: "k", reply: Self.hash(["counter": Array("1".utf8)]))
        }
    }

    @Test func serverErrorsThatMeanUnavailableAreNotProtocolErrors() {
        #expect(
            RedisReplies.serverError(.error("LOADING Redis is loading the dataset in memory"), command: "GET")?.kind
                == .unavailable
        )
        #expect(
            RedisReplies.serverError(.error("READONLY You can't write against a read only replica."), command: "SET")?
                .kind == .unavailable
        )
        #expect(
            RedisReplies.serverError(.error("ERR unknown command 'GETDEL'"), command: "GETDEL")?.kind == .protocolError
        )
        #expect(RedisReplies.serverError(.status("OK"), command: "SET") == nil)
        #expect(RedisReply.error("NOSCRIPT No matching script").errorCode == "NOSCRIPT")
    }

    @Test func memoryStoreChallengeExpiresByItsClock() async {
        let now = Mutex(ContinuousClock.now)
        let store = MemoryStore(clock: { now.withLock { $0 } })
        #expect(await store.putChallenge("c", ttlSeconds: 10).value == true)
        #expect(await store.putChallenge("d", ttlSeconds: 10).value == true)
        now.withLock { $0 += .seconds(9) }
        #expect(await store.consumeChallenge("c").value == true)
        now.withLock { $0 += .seconds(2) }
        #expect(await store.consumeChallenge("d").value == false, "expired at 10 s")
        #expect(await store.putChallenge("d", ttlSeconds: 10).value == true, "an expired challenge can be issued again")
    }

    /// No I/O, so no hand-off: every call completes inside itself, on the caller's thread
    /// (a request verified on an event loop stays there).
    @Test func memoryStoreCompletesInsideTheCall() {
        let store = MemoryStore()
        let completed = Mutex(0)
        let record = KeyRecord(
            keyID: "k", publicKey: [4], counter: 0, appID: "A.b", environment: "production", receipt: [],
            attestedAt: Date())
        store.putChallenge("c", ttlSeconds: 5) { _ in completed.withLock { $0 += 1 } }
        store.consumeChallenge("c") { _ in completed.withLock { $0 += 1 } }
        store.createKey(record) { _ in completed.withLock { $0 += 1 } }
        store.fetchKey(keyID: "k") { _ in completed.withLock { $0 += 1 } }
        store.advanceCounter(keyID: "k", to: 1) { _ in completed.withLock { $0 += 1 } }
        store.revokeKey(keyID: "k") { _ in completed.withLock { $0 += 1 } }
        store.ping { _ in completed.withLock { $0 += 1 } }
        #expect(completed.withLock { $0 } == 7)
    }

    static func hash(_ fields: [String: [UInt8]]) -> RedisReply {
        .array(fields.sorted { $0.key < $1.key }.flatMap { [RedisReply.bulk(Array($0.key.utf8)), .bulk($0.value)] })
    }
}
