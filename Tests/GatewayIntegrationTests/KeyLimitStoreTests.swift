import Foundation
import GatewayTesting
import Testing

@testable import KeyStore
@testable import PolicyModel
@testable import RedisClient

/// `key_limits` in the counter script against a real redis-server (and the memory store, the
/// same rule): the bucket, the quota, the order against the counter, and atomicity under
/// concurrent requests from several gateways. The arithmetic itself: `KeyLimitsTests`.
@Suite(.timeLimit(.minutes(2))) struct KeyLimitStoreTests {
    static let kinds: [StoreKind] = [.memory, .redis, .redisOnLoop, .cluster]

    static func charge(_ limits: KeyLimits, route: String = "api") -> KeyLimitCharge {
        KeyLimitCharge(route: route, limits: limits)
    }

    @Test(arguments: Self.kinds)
    func theBurstPassesThenTheBucketRefusesWithoutAdvancingTheCounter(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            let record = sampleRecord(counter: 0)
            #expect(await store.createKey(record).value == .created)
            let limits = Self.charge(KeyLimits(rate: .init(count: 1, per: .hour), burst: 3))
            for c in UInt32(1)...3 {
                #expect(await store.advanceCounter(keyID: record.keyID, to: c, limits: limits).value == .advanced)
            }
            let refused = await store.advanceCounter(keyID: record.keyID, to: 4, limits: limits).value
            guard case .limited(let refusal)? = refused else {
                Issue.record("expected a limit refusal, got \(String(describing: refused))")
                return
            }
            #expect(refusal.limit == .rate)
            #expect((3595...3600).contains(refusal.retryAfterSeconds), "one hour to the next token")
            let stored = try #require(await store.fetchKey(keyID: record.keyID).value ?? nil)
            #expect(stored.counter == 3, "a limited request leaves the counter where it was")
            // A replay is judged as a replay first, and spends nothing.
            #expect(
                await store.advanceCounter(keyID: record.keyID, to: 2, limits: limits).value
                    == .notIncreasing(stored: 3))
            // Another route keeps its own bucket for the same key.
            let other = Self.charge(KeyLimits(rate: .init(count: 1, per: .hour), burst: 1), route: "other")
            #expect(await store.advanceCounter(keyID: record.keyID, to: 4, limits: other).value == .advanced)
        }
    }

    @Test(arguments: Self.kinds)
    func theDailyQuotaRefusesUntilTheUTCDayEnds(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            let record = sampleRecord(counter: 0)
            #expect(await store.createKey(record).value == .created)
            let limits = Self.charge(KeyLimits(rate: nil, dailyQuota: 2))
            #expect(
                await store.advanceCounter(keyID: record.keyID, to: 1, window: 8, limits: limits).value == .advanced)
            #expect(
                await store.advanceCounter(keyID: record.keyID, to: 3, window: 8, limits: limits).value == .advanced)
            let secondsLeft = 86_400 - Int(Date().timeIntervalSince1970) % 86_400
            let refused = await store.advanceCounter(keyID: record.keyID, to: 2, window: 8, limits: limits).value
            guard case .limited(let refusal)? = refused else {
                Issue.record("expected a quota refusal, got \(String(describing: refused))")
                return
            }
            #expect(refusal.limit == .dailyQuota)
            #expect(abs(refusal.retryAfterSeconds - secondsLeft) <= 5, "until 00:00 UTC")
            // The out-of-order counter 2 was not marked seen: without the limit it passes once.
            #expect(await store.advanceCounter(keyID: record.keyID, to: 2, window: 8).value == .acceptedOutOfOrder)
        }
    }

    /// A 1/s bucket of one: refused at once, admitted again a token later (the server's clock;
    /// a whole second between two calls, so a loaded machine does not refill it early).
    @Test(arguments: [StoreKind.redis])
    func aTokenComesBackAfterItsInterval(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            let record = sampleRecord(counter: 0)
            #expect(await store.createKey(record).value == .created)
            let limits = Self.charge(KeyLimits(rate: .init(count: 1, per: .second), burst: 1))
            #expect(await store.advanceCounter(keyID: record.keyID, to: 1, limits: limits).value == .advanced)
            #expect(
                await store.advanceCounter(keyID: record.keyID, to: 2, limits: limits).value
                    == .limited(KeyLimitRefusal(limit: .rate, retryAfterSeconds: 1)))
            try await Task.sleep(for: .milliseconds(1100))
            #expect(await store.advanceCounter(keyID: record.keyID, to: 2, limits: limits).value == .advanced)
        }
    }

    /// 200 requests of one key at once, through four gateways' stores, with distinct valid
    /// counters: exactly the burst passes, whatever the interleaving.
    @Test func twoHundredConcurrentRequestsOfOneKeyNeverExceedTheBucket() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let url = try RedisURL(parsing: server.urlString())
        let stores = (0..<4).map { RedisStore(url: url, label: "limit-race-\($0)") }
        defer { stores.forEach { $0.close() } }
        for store in stores { #expect(await waitUntilReachable(store)) }
        let record = sampleRecord(counter: 0)
        #expect(await stores[0].createKey(record).value == .created)
        let limits = Self.charge(KeyLimits(rate: .init(count: 1, per: .hour), burst: 20))
        let results: [Result<CounterAdvanceReading, StoreError>] = await concurrently(200) { index, done in
            stores[index % stores.count].advanceCounterReadingRisk(
                keyID: record.keyID, to: UInt32(index + 1), window: 256, lazyRefreshAt: nil, limits: limits,
                completion: done)
        }
        #expect(results.allSatisfy { $0.error == nil })
        let admitted = results.filter { $0.value?.advance == .advanced || $0.value?.advance == .acceptedOutOfOrder }
        #expect(admitted.count == 20)
        let limited = results.filter {
            if case .limited(let refusal)? = $0.value?.advance { return refusal.limit == .rate }
            return false
        }
        #expect(limited.count == 180)
    }
}

/// The fleet's per-app, per-minute attestation counter in Redis (single node and cluster):
/// shared by every gateway's store, apart per app and minute, and expiring on its own.
@Suite(.timeLimit(.minutes(2))) struct AttestationRateStoreTests {
    static func count(_ store: RedisStore, _ app: String, _ minute: Int64) async -> Result<Int, StoreError> {
        await withCheckedContinuation { c in
            store.countAttestation(appID: app, minute: minute) { c.resume(returning: $0) }
        }
    }

    @Test func gatewaysShareOneCounterPerAppAndMinute() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let url = try RedisURL(parsing: server.urlString())
        let stores = (0..<2).map { RedisStore(url: url, label: "fleet-rate-\($0)") }
        defer { stores.forEach { $0.close() } }
        for store in stores { #expect(await waitUntilReachable(store)) }
        #expect(await Self.count(stores[0], "T.app", 100).value == 1)
        #expect(await Self.count(stores[1], "T.app", 100).value == 2, "the other gateway adds to it")
        #expect(await Self.count(stores[1], "T.other", 100).value == 1)
        #expect(await Self.count(stores[0], "T.app", 101).value == 1)
        guard case .integer(let ttl) = try server.command("TTL", "appattest:fleet:{T.app}:100") else {
            Issue.record("TTL is not an integer")
            return
        }
        #expect((1...120).contains(ttl), "the counter expires on its own: \(ttl)")
    }

    @Test func theCounterWorksOnACluster() async throws {
        try await withStore(.cluster) { store, _ in
            let counting = try #require(
                (store as? CallingFromLoop)?.base as? any AttestationRateCounting ?? store
                    as? any AttestationRateCounting)
            for expected in 1...3 {
                let result = await withCheckedContinuation { c in
                    counting.countAttestation(appID: "T.app", minute: 7) { c.resume(returning: $0) }
                }
                #expect(result.value == expected)
            }
        }
    }
}
