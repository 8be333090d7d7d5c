import Foundation
import GatewayTesting
import Testing

@testable import GatewayIO
@testable import HTTP1
@testable import KeyStore
@testable import RedisClient

/// Which store a parameterized test runs against.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    /// `MemoryStore`.
    case memory
    /// `RedisStore` called from test threads: its shared connection, on Dispatch sources.
    case redis
    /// `RedisStore` called from an event loop's queue, as the gateway calls it: that loop's
    /// own connection, driven by the loop's epoll.
    case redisOnLoop
    /// `RedisStore` on a real 3-primary Redis Cluster (`redis-cluster://`), called from an
    /// event loop's queue: one connection per primary on that loop.
    case cluster
    /// `RedisStore` on a primary named by a real Redis Sentinel (`redis-sentinel://`).
    case sentinel
    /// The same over TLS (`rediss-sentinel://`): sentinel and data node on their TLS ports,
    /// with the test client certificate (`tls-auth-clients yes`).
    case sentinelTLS
    /// `RedisStore` over TLS (`rediss://`, test CA) as an ACL user whose password is read from
    /// a file, called from test threads (Dispatch sources).
    case redisTLS
    /// The same, called from an event loop's queue (the loop's epoll drives the TLS socket).
    case redisTLSOnLoop
    var testDescription: String { self.rawValue }

    static let redisKinds: [StoreKind] = [.redis, .redisOnLoop]
}

/// A Redis store under test, the store the test calls, and the connection those calls take.
struct RedisUnderTest {
    let redis: RedisStore
    let store: any AttestStore
    let carrier: RedisConnection
    /// Kept alive with the store (loop kinds).
    let group: EventLoopGroup?

    init(
        _ kind: StoreKind, url: RedisURL, configuration: RedisConfiguration = RedisConfiguration(),
        tls: RedisTLS? = nil
    ) throws {
        switch kind {
        case .redisOnLoop, .cluster, .redisTLSOnLoop:
            let group = try EventLoopGroup(count: 1)
            let redis = RedisStore(url: url, configuration: configuration, loops: group.loops, tls: tls)
            self.redis = redis
            self.store = CallingFromLoop(base: redis, loop: group.loops[0])
            self.carrier = kind == .cluster ? redis.connections[0] : redis.connections[1]
            self.group = group
        default:
            let redis = RedisStore(url: url, configuration: configuration, tls: tls)
            self.redis = redis
            self.store = redis
            self.carrier = redis.connection
            self.group = nil
        }
    }
}

/// Makes every call of `base` on `loop`'s queue, as a gateway connection does.
final class CallingFromLoop: AttestStore {
    let base: any AttestStore
    let loop: EventLoop

    init(base: any AttestStore, loop: EventLoop) {
        self.base = base
        self.loop = loop
    }

    func putChallenge(_ c: String, ttlSeconds: Int, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void)
    {
        self.loop.execute { [base] in base.putChallenge(c, ttlSeconds: ttlSeconds, completion: completion) }
    }
    func consumeChallenge(_ c: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        self.loop.execute { [base] in base.consumeChallenge(c, completion: completion) }
    }
    func createKey(_ record: KeyRecord, completion: @escaping @Sendable (Result<KeyCreation, StoreError>) -> Void) {
        self.loop.execute { [base] in base.createKey(record, completion: completion) }
    }
    func fetchKey(keyID: String, completion: @escaping @Sendable (Result<KeyRecord?, StoreError>) -> Void) {
        self.loop.execute { [base] in base.fetchKey(keyID: keyID, completion: completion) }
    }
    func advanceCounter(
        keyID: String, to newCounter: UInt32, window: Int,
        completion: @escaping @Sendable (Result<CounterAdvance, StoreError>) -> Void
    ) {
        self.loop.execute { [base] in
            base.advanceCounter(keyID: keyID, to: newCounter, window: window, completion: completion)
        }
    }
    func advanceCounterReadingRisk(
        keyID: String, to newCounter: UInt32, window: Int, lazyRefreshAt: Date?, limits: KeyLimitCharge?,
        completion: @escaping @Sendable (Result<CounterAdvanceReading, StoreError>) -> Void
    ) {
        self.loop.execute { [base] in
            base.advanceCounterReadingRisk(
                keyID: keyID, to: newCounter, window: window, lazyRefreshAt: lazyRefreshAt, limits: limits,
                completion: completion)
        }
    }
    func createDebugToken(
        _ record: DebugTokenRecord, digest: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        self.loop.execute { [base] in base.createDebugToken(record, digest: digest, completion: completion) }
    }
    func useDebugToken(
        digest: String, now: Date, completion: @escaping @Sendable (Result<DebugTokenUse, StoreError>) -> Void
    ) {
        self.loop.execute { [base] in base.useDebugToken(digest: digest, now: now, completion: completion) }
    }
    func listDebugTokens(completion: @escaping @Sendable (Result<[DebugTokenRecord], StoreError>) -> Void) {
        self.loop.execute { [base] in base.listDebugTokens(completion: completion) }
    }
    func revokeDebugToken(name: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        self.loop.execute { [base] in base.revokeDebugToken(name: name, completion: completion) }
    }
    func revokeKey(keyID: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        self.loop.execute { [base] in base.revokeKey(keyID: keyID, completion: completion) }
    }
    func recordPlayIntegrityVerdict(
        keyID: String, verdict: String, at time: Date,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        self.loop.execute { [base] in
            base.recordPlayIntegrityVerdict(keyID: keyID, verdict: verdict, at: time, completion: completion)
        }
    }
    func ping(completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        self.loop.execute { [base] in base.ping(completion: completion) }
    }
    func sharedSecret(
        name: String, proposed: [UInt8], completion: @escaping @Sendable (Result<[UInt8], StoreError>) -> Void
    ) {
        self.loop.execute { [base] in base.sharedSecret(name: name, proposed: proposed, completion: completion) }
    }
}

/// Runs `body` with a fresh store of `kind`; for Redis, with its own redis-server, stopped after.
func withStore<T>(_ kind: StoreKind, _ body: (any AttestStore, RedisServer?) async throws -> T) async throws -> T {
    switch kind {
    case .memory:
        return try await body(MemoryStore(), nil)
    case .redis, .redisOnLoop:
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let subject = try RedisUnderTest(kind, url: try RedisURL(parsing: server.urlString()))
        defer { subject.redis.close() }
        let result = try await body(subject.store, server)
        withExtendedLifetime(subject) {}
        return result
    case .redisTLS, .redisTLSOnLoop:
        let server = try TLSRedisServer.start()
        defer { server.shutDown() }
        let subject = try RedisUnderTest(kind, url: try server.url(), tls: try TLSRedisServer.tls())
        defer { subject.redis.close() }
        try await waitUntilReady(subject.redis)
        let result = try await body(subject.store, server.server)
        withExtendedLifetime(subject) {}
        return result
    case .cluster:
        let cluster = try RedisClusterFixture.start()
        defer { cluster.shutDown() }
        let subject = try RedisUnderTest(kind, url: try RedisURL(parsing: cluster.urlString))
        defer { subject.redis.close() }
        try await waitUntilReady(subject.redis)
        let result = try await body(subject.store, nil)
        withExtendedLifetime(subject) {}
        return result
    case .sentinel:
        let sentinel = try RedisSentinelFixture.start(replicas: 0, sentinels: 1)
        defer { sentinel.shutDown() }
        let subject = try RedisUnderTest(kind, url: try RedisURL(parsing: sentinel.urlString))
        defer { subject.redis.close() }
        try await waitUntilReady(subject.redis)
        let result = try await body(subject.store, sentinel.primary)
        withExtendedLifetime(subject) {}
        return result
    case .sentinelTLS:
        let sentinel = try RedisSentinelFixture.start(replicas: 0, sentinels: 1, tls: true)
        defer { sentinel.shutDown() }
        let subject = try RedisUnderTest(
            kind, url: try RedisURL(parsing: sentinel.urlString), tls: try RedisSentinelFixture.storeTLS)
        defer { subject.redis.close() }
        try await waitUntilReady(subject.redis)
        let result = try await body(subject.store, sentinel.primary)
        withExtendedLifetime(subject) {}
        return result
    }
}

/// Waits (bounded) until every connection of `store` is ready (cluster: the slot map loaded).
func waitUntilReady(_ store: RedisStore, timeout: Duration = .seconds(10)) async throws {
    let deadline = ContinuousClock.now + timeout
    while !store.isReady {
        guard ContinuousClock.now < deadline else {
            throw RedisServerError("store \(store.url) not ready within \(timeout)")
        }
        try await Task.sleep(for: .milliseconds(20))
    }
}

/// Seconds elapsed since `start`.
func seconds(since start: ContinuousClock.Instant) -> Double {
    let d = ContinuousClock.now - start
    return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}

/// Polls `ping` until it succeeds or `limit` passes.
func waitUntilReachable(_ store: any AttestStore, limit: Duration = .seconds(8)) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if await store.ping().error == nil { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return false
}

/// Runs one store call and measures its latency in the completion itself (on the store's
/// queue), so that a busy Swift concurrency pool cannot inflate it.
func timed<T: Sendable>(
    _ start: (@escaping @Sendable (Result<T, StoreError>) -> Void) -> Void
) async -> (result: Result<T, StoreError>, seconds: Double) {
    let begin = ContinuousClock.now
    return await withCheckedContinuation { continuation in
        start { result in continuation.resume(returning: (result, seconds(since: begin))) }
    }
}
