import Foundation
import GatewayTesting
import Testing

@testable import GatewayIO
@testable import RedisClient

/// Redis host names are looked up on `HostResolver`'s queue, never on the connection's queue:
/// on an event loop a blocking getaddrinfo would stall every client and every other Redis
/// command of that loop for as long as DNS takes.
@Suite(.timeLimit(.minutes(1))) struct StoreHostResolutionTests {
    /// The longest a held lookup waits for the test to release it: far beyond the bounds
    /// below, so that a lookup run on the loop would show as a stalled loop.
    static let maximumHold: DispatchTimeInterval = .seconds(5)

    /// A resolver whose lookups hang (a slow DNS server) until `release` is signalled (or
    /// `maximumHold` passed), then answer 127.0.0.1.
    static func heldResolver(lookups: LookupLog, release: DispatchSemaphore) -> HostResolver {
        HostResolver(label: "test.redis.slow-resolver") { host, port throws(IOError) in
            lookups.record(host)
            _ = release.wait(timeout: .now() + Self.maximumHold)
            return try SocketAddress.resolve(host: "127.0.0.1", port: port)
        }
    }

    static func send(_ connection: RedisConnection, _ words: String...) async -> Result<RedisReply, StoreError> {
        await withCheckedContinuation { continuation in
            connection.send(words.map { Array($0.utf8) }) { continuation.resume(returning: $0) }
        }
    }

    /// How long the loop takes to run a no-op submitted now.
    static func loopLatency(_ loop: EventLoop) async -> Duration {
        let start = ContinuousClock.now
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            loop.execute { continuation.resume() }
        }
        return ContinuousClock.now - start
    }

    @Test func slowHostNameStallsNeitherTheLoopNorTheOtherConnection() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let group = try EventLoopGroup(count: 1)
        let loop = group.loops[0]
        let configuration = RedisConfiguration(logsConnectionEvents: false)
        let fast = RedisConnection(
            url: try RedisURL(parsing: server.urlString()), configuration: configuration, label: "test.fast",
            loop: loop)
        fast.start()
        defer { fast.close() }
        try await waitUntil("the literal-address connection is ready") { fast.counters.isReady }

        let lookups = LookupLog()
        let release = DispatchSemaphore(value: 0)
        let slow = RedisConnection(
            url: try RedisURL(parsing: "redis://redis.slow.test:\(server.port)/"), configuration: configuration,
            label: "test.slow", loop: loop, hostResolver: Self.heldResolver(lookups: lookups, release: release))
        slow.start()
        defer { slow.close() }
        try await waitUntil("the lookup started") { lookups.hosts == ["redis.slow.test"] }

        // While the lookup runs: the loop and the other connection answer at once, and the
        // resolving connection fails fast (it has no socket yet) instead of queueing.
        var worstLoop: Duration = .zero
        var worstPing: Duration = .zero
        var pings = 0
        let heldSince = ContinuousClock.now
        while pings < 20 {
            worstLoop = max(worstLoop, await Self.loopLatency(loop))
            let sent = ContinuousClock.now
            let reply = await Self.send(fast, "PING")
            worstPing = max(worstPing, ContinuousClock.now - sent)
            #expect(reply.value == .status("PONG"))
            pings += 1
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(!slow.counters.isReady)
        let early = await Self.send(slow, "PING")
        #expect(early.error?.kind == .unavailable)
        #expect(early.error?.reason.contains("resolving redis.slow.test") == true, "\(String(describing: early))")
        let held = ContinuousClock.now - heldSince
        print("during a held lookup (\(held)): \(pings) PINGs, worst \(worstPing); worst loop turn \(worstLoop)")
        #expect(held < .seconds(4), "the loop or the other connection waited for the lookup")
        #expect(worstLoop < .seconds(1), "the loop waited for DNS")
        #expect(worstPing < .seconds(1), "the other connection waited for DNS")
        #expect(lookups.hosts == ["redis.slow.test"])

        // Then the answer comes back to the loop and the connection opens to the address.
        release.signal()
        try await waitUntil("the resolved connection is ready") { slow.counters.isReady }
        #expect(await Self.send(slow, "PING").value == .status("PONG"))

        // A reconnect after a healthy connection broke reuses the address: no second lookup.
        _ = try server.command("CLIENT", "KILL", "TYPE", "normal")
        try await waitUntil("both reconnected") { slow.counters.isReady && fast.counters.isReady }
        try await waitUntil("a command passes on the reconnected connection") {
            await Self.send(slow, "PING").value == .status("PONG")
        }
        #expect(lookups.hosts == ["redis.slow.test"])
    }

    @Test func unknownHostFailsTheAttemptWithItsNameAndTheLoopKeepsRunning() async throws {
        let group = try EventLoopGroup(count: 1)
        let loop = group.loops[0]
        let connection = RedisConnection(
            url: try RedisURL(parsing: "redis://no-such-host.invalid:6379/"),
            configuration: RedisConfiguration(logsConnectionEvents: false), label: "test.unknown", loop: loop)
        connection.start()
        defer { connection.close() }
        try await waitUntil("the attempt failed") { connection.counters.lastFailure != nil }
        let failure = try #require(connection.counters.lastFailure)
        #expect(failure.reason.contains("no-such-host.invalid:6379"), "\(failure.reason)")
        #expect(failure.reason.contains("getaddrinfo"), "\(failure.reason)")
        #expect(!failure.isConfiguration, "DNS may come back: it is an outage")
        #expect(await Self.loopLatency(loop) < .milliseconds(300))
        let reply = await Self.send(connection, "PING")
        #expect(reply.error?.kind == .unavailable)
    }
}

/// The host names a test resolver was asked for, in order.
final class LookupLog: @unchecked Sendable {
    private let lock = NSLock()
    private var names: [String] = []
    var hosts: [String] { self.lock.withLock { self.names } }
    func record(_ host: String) { self.lock.withLock { self.names.append(host) } }
}

private func waitUntil(
    _ what: String, timeout: Duration = .seconds(10), _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    throw RedisServerError("\(what): not within \(timeout)")
}
