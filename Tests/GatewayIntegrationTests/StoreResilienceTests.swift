import Foundation
import GatewayTesting
import Synchronization
import Testing

@testable import HTTP1
@testable import KeyStore
@testable import RedisClient

/// Outages, hangs and overload against a real redis-server: every command completes, with
/// an error when Redis cannot answer, within its timeout; the same store recovers.
@Suite(.timeLimit(.minutes(1))) struct StoreResilienceTests {
    /// Timing bounds leave room for a loaded 2-core machine; what they prove is "bounded",
    /// not "fast".
    static let schedulingSlack = 0.75

    struct Sample: Sendable {
        var sentAt: Double
        var latency: Double
        var result: Result<Bool, StoreError>
    }

    @Test func serverStoppedMidTrafficFailsEveryCommandInTimeAndTheStoreRecovers() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let configuration = RedisConfiguration(
            commandTimeout: .milliseconds(250),
            reconnectBackoffMaximum: .milliseconds(400)
        )
        let store = RedisStore(url: try RedisURL(parsing: server.urlString()), configuration: configuration)
        defer { store.close() }
        #expect(await waitUntilReachable(store))

        // Traffic from a dedicated thread (not the Swift concurrency pool, which other tests
        // may keep busy): one command every 2 ms, without waiting for replies (pipelined),
        // until at least 50 were sent well after the outage began (bounded to 6 s).
        let samples = SampleLog()
        let start = ContinuousClock.now
        let stopSending = Mutex<Double?>(nil)  // seconds since start after which to stop
        let finished = DispatchSemaphore(value: 0)
        let sentCount = Mutex(0)
        let generator = Thread {
            while seconds(since: start) < 6 {
                if let until = stopSending.withLock({ $0 }), seconds(since: start) > until { break }
                let sentAt = seconds(since: start)
                sentCount.withLock { $0 += 1 }
                store.putChallenge(randomToken(), ttlSeconds: 60) { result in
                    samples.append(Sample(sentAt: sentAt, latency: seconds(since: start) - sentAt, result: result))
                }
                usleep(2000)
            }
            finished.signal()
        }
        generator.start()
        // At least 50 successful commands before the outage (bounded wait).
        while samples.snapshot().filter({ $0.result.value == true }).count < 50 && seconds(since: start) < 3 {
            try await Task.sleep(for: .milliseconds(20))
        }
        let stoppedAt = seconds(since: start)
        try server.stop()
        let stopDone = seconds(since: start)
        // Then at least 50 more, sent from 0.1 s after the stop on.
        while samples.snapshot().filter({ $0.sentAt > stopDone + 0.1 }).count < 50 && seconds(since: start) < 5 {
            try await Task.sleep(for: .milliseconds(20))
        }
        stopSending.withLock { $0 = seconds(since: start) }
        while finished.wait(timeout: .now()) == .timedOut { try await Task.sleep(for: .milliseconds(10)) }
        let sent = sentCount.withLock { $0 }
        // Every command must complete within its timeout (+ slack): wait at most that long.
        try await Task.sleep(for: .milliseconds(Int((0.25 + Self.schedulingSlack) * 1000)))
        let all = samples.snapshot()
        #expect(all.count == sent, "every command completed")
        #expect(all.count > 100)
        let late = all.filter { $0.latency > 0.25 + Self.schedulingSlack }
        #expect(
            late.isEmpty,
            "\(late.count) commands took longer than the timeout; worst \(late.map(\.latency).max() ?? 0)"
        )
        let before = all.filter { $0.sentAt < stoppedAt - 0.05 }
        #expect(!before.isEmpty && before.allSatisfy { $0.result.value == true }, "all succeed before the outage")
        let after = all.filter { $0.sentAt > stopDone + 0.1 }
        // The wait above ends at 50 (it was `> 50` here: a run whose sender stopped right at
        // 50 failed, seen under load).
        #expect(after.count >= 50)
        #expect(
            after.allSatisfy { $0.result.error?.kind == .unavailable },
            "fail fast (not time out) once the loss is known"
        )
        let kinds = Set(all.compactMap { $0.result.error?.kind })
        #expect(kinds.isSubset(of: [.unavailable, .timeout]))

        #expect(!store.connection.counters.isReady)
        let attemptsDuringOutage = store.connection.counters.connectAttempts
        #expect(attemptsDuringOutage >= 2, "reconnect attempts with backoff")

        // Redis back on the same port: the same store instance reconnects, reloads its scripts.
        try server.restart()
        #expect(await waitUntilReachable(store))
        #expect(store.connection.counters.isReady)
        #expect(store.connection.counters.liveDrivers == 1, "the failed attempts left nothing behind")
        let record = sampleRecord(counter: 1)
        #expect(await store.createKey(record).value == .created)
        #expect(await store.advanceCounter(keyID: record.keyID, to: 2).value == .advanced)
    }

    @Test(arguments: StoreKind.redisKinds)
    func crashedServerFailsPendingCommandsAtOnce(kind: StoreKind) async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let subject = try RedisUnderTest(kind, url: try RedisURL(parsing: server.urlString()))
        let store = subject.store
        defer { subject.redis.close() }
        #expect(await waitUntilReachable(store))
        server.pause()  // commands pile up unanswered
        async let first = timed { store.ping(completion: $0) }
        async let second = timed { store.consumeChallenge("x", completion: $0) }
        try await Task.sleep(for: .milliseconds(50))
        server.kill9()
        let results = await [first.result.error, second.result.error]
        #expect(results.allSatisfy { $0?.kind == .unavailable || $0?.kind == .timeout })
        let latencies = await [first.seconds, second.seconds]
        #expect(latencies.allSatisfy { $0 < 0.25 + Self.schedulingSlack }, "\(latencies)")
        try server.restart()
        #expect(await waitUntilReachable(store))
    }

    @Test(arguments: StoreKind.redisKinds)
    func pausedServerTimesOutAndLateRepliesAreDropped(kind: StoreKind) async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let subject = try RedisUnderTest(kind, url: try RedisURL(parsing: server.urlString()))  // default 250 ms
        let store = subject.store
        defer { subject.redis.close() }
        #expect(await waitUntilReachable(store))
        #expect(await store.putChallenge("late-a", ttlSeconds: 60).value == true)

        server.pause()
        let (result, elapsed) = await timed { store.consumeChallenge("late-a", completion: $0) }
        #expect(result.error?.kind == .timeout)
        #expect(subject.carrier.counters.commandTimeouts == 1)
        #expect(elapsed >= 0.24, "not before the timeout: \(elapsed)")
        #expect(elapsed < 0.25 + Self.schedulingSlack, "on time: \(elapsed)")
        server.resume()

        // The GETDEL still ran on the server after the resume; its late reply must not be
        // taken for the reply of any later command.
        #expect(await store.putChallenge("late-b", ttlSeconds: 60).value == true)
        #expect(await store.consumeChallenge("late-b").value == true)
        #expect(await store.consumeChallenge("late-b").value == false)
        #expect(await store.consumeChallenge("late-a").value == false, "consumed by the late GETDEL")
    }

    @Test func debugSleepTimesOut() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let store = RedisStore(url: try RedisURL(parsing: server.urlString()))
        defer { store.close() }
        #expect(await waitUntilReachable(store))
        // DEBUG SLEEP on the store's own connection: the PING behind it is sure to wait for
        // it (replies are ordered), however loaded the machine is.
        let sleeping: Result<RedisReply, StoreError> = await withCheckedContinuation { continuation in
            store.connection.send([Array("DEBUG".utf8), Array("SLEEP".utf8), Array("1".utf8)]) { _ in }
            store.connection.send([Array("PING".utf8)]) { continuation.resume(returning: $0) }
        }
        #expect(sleeping.error?.kind == .timeout)
        let (result, elapsed) = await timed { store.ping(completion: $0) }
        #expect(result.error?.kind == .timeout, "the server still sleeps")
        #expect(elapsed >= 0.24 && elapsed < 0.25 + Self.schedulingSlack, "\(elapsed)")
        // Both late replies are dropped; the store answers again once the sleep is over.
        #expect(await waitUntilReachable(store, limit: .seconds(5)))
        #expect(store.connection.counters.commandTimeouts >= 3)
        #expect(await store.putChallenge("after-sleep", ttlSeconds: 60).value == true)
        #expect(await store.consumeChallenge("after-sleep").value == true)
    }

    @Test(arguments: StoreKind.redisKinds)
    func hungConnectionIsResetAndTheStoreRecovers(kind: StoreKind) async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let configuration = RedisConfiguration(
            commandTimeout: .milliseconds(100),
            connectTimeout: .milliseconds(300),
            reconnectBackoffInitial: .milliseconds(20),
            reconnectBackoffMaximum: .milliseconds(100),
            staleConnectionTimeout: .milliseconds(400)
        )
        let subject = try RedisUnderTest(
            kind, url: try RedisURL(parsing: server.urlString()), configuration: configuration)
        let store = subject.store
        defer { subject.redis.close() }
        #expect(await waitUntilReachable(store))
        server.pause()
        let hung: [Result<Void, StoreError>] = await concurrently(3) { _, done in store.ping(completion: done) }
        #expect(hung.allSatisfy { $0.error?.kind == .timeout })
        // Past the stale limit the connection is dropped; the reconnect attempts (to a
        // server that accepts TCP but never answers) fail by the connect timeout.
        try await Task.sleep(for: .milliseconds(900))
        let during = await store.ping().error?.kind
        #expect(during == .unavailable || during == .timeout)
        server.resume()
        #expect(await waitUntilReachable(store))
        #expect(await store.putChallenge("after-hang", ttlSeconds: 60).value == true)
        #expect(await store.consumeChallenge("after-hang").value == true)
    }

    @Test func tooManyCommandsInFlightAreRefusedAsOverloaded() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let configuration = RedisConfiguration(commandTimeout: .milliseconds(200), maxPendingCommands: 4)
        let store = RedisStore(url: try RedisURL(parsing: server.urlString()), configuration: configuration)
        defer { store.close() }
        #expect(await waitUntilReachable(store))
        server.pause()
        let results: [Result<Void, StoreError>] = await concurrently(10) { _, done in store.ping(completion: done) }
        #expect(results.filter { $0.error?.kind == .timeout }.count == 4)
        #expect(results.filter { $0.error?.kind == .overloaded }.count == 6)
        // Timed-out commands still hold their place until their late reply: still full.
        #expect(await store.ping().error?.kind == .overloaded)
        server.resume()
        #expect(await waitUntilReachable(store))
    }

    @Test func unreachableServerFailsFast() async throws {
        let refusing = try RefusingPort()
        let store = RedisStore(url: try RedisURL(parsing: "redis://127.0.0.1:\(refusing.port)/0"))
        defer { store.close() }
        for _ in 0..<5 {
            let (result, elapsed) = await timed { store.ping(completion: $0) }
            #expect(result.error?.kind == .unavailable)
            #expect(elapsed < 0.25 + Self.schedulingSlack)
        }
        withExtendedLifetime(refusing) {}
    }

    @Test func closedStoreRefusesCommands() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let store = RedisStore(url: try RedisURL(parsing: server.urlString()))
        #expect(await waitUntilReachable(store))
        #expect(store.connection.counters.isReady)
        store.close()
        let result = await store.ping()
        #expect(result.error?.kind == .unavailable)
        #expect(!store.connection.counters.isReady)
    }
}

/// Thread-safe list of samples with a bounded wait for completions.
final class SampleLog: @unchecked Sendable {
    private let lock = NSLock()
    private var samples: [StoreResilienceTests.Sample] = []
    private var sent = 0

    func append(_ sample: StoreResilienceTests.Sample) {
        self.lock.lock()
        self.samples.append(sample)
        self.lock.unlock()
    }

    func snapshot() -> [StoreResilienceTests.Sample] {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.samples
    }

}
