import Foundation
import GatewayTesting
import Testing

@testable import RedisClient

/// Sentinel `+switch-master`: the resolver's subscribers hear the switch and move every
/// watched connection at once, with the periodic question turned down to once a minute so
/// that it cannot be what noticed.
@Suite(.serialized, .timeLimit(.minutes(2))) struct StoreSentinelSwitchTests {
    @Test func switchMasterMessageMovesTheConnectionWithoutWaitingForThePoll() async throws {
        let sentinel = try RedisSentinelFixture.start(replicas: 1, sentinels: 3)
        defer { sentinel.shutDown() }
        let configuration = RedisConfiguration(logsConnectionEvents: false)
        let counters = RedisClusterCounters()
        let url = try RedisURL(parsing: sentinel.urlString)
        guard case .sentinel(let sentinels, let masterName) = url.topology else {
            throw RedisServerError("not a sentinel URL")
        }
        let resolver = RedisSentinelResolver(
            sentinels: sentinels, masterName: masterName, configuration: configuration, counters: counters,
            pollInterval: .seconds(60), label: "test.sentinel")
        let connection = RedisConnection(
            url: url, configuration: configuration, label: "test.sentinel.data", resolver: resolver)
        resolver.watch(connection)
        connection.start()
        resolver.start()
        defer {
            connection.close()
            resolver.close()
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while !(connection.counters.isReady && resolver.subscribedCount == sentinels.count) {
            guard ContinuousClock.now < deadline else { throw RedisServerError("not ready/subscribed in time") }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(counters.failovers == 0)

        // A sentinel refuses FAILOVER (NOGOODSLAVE) until it has discovered the replica through the
        // primary's INFO, which on a loaded machine can take longer than the fixture's start-up.
        var startedAt = ContinuousClock.now
        var answer = RESPValue.null
        while ContinuousClock.now < startedAt + .seconds(20) {
            answer = try sentinel.sentinels[0].command("SENTINEL", "FAILOVER", RedisSentinelFixture.masterName)
            if answer == .status("OK") { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        try #require(answer == .status("OK"), "SENTINEL FAILOVER answered \(answer)")
        startedAt = ContinuousClock.now
        // Ask the connection which server it is on until it is the promoted replica.
        let target = "tcp_port:\(sentinel.replicas[0].port)"
        var movedAt: ContinuousClock.Instant?
        while ContinuousClock.now < startedAt + .seconds(20) {
            let result = await withCheckedContinuation { continuation in
                connection.send([Array("INFO".utf8), Array("server".utf8)]) { continuation.resume(returning: $0) }
            }
            if case .success(let reply) = result, reply.text?.contains(target) == true {
                movedAt = ContinuousClock.now
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        let moved = try #require(movedAt, "the connection followed the failover")
        print(
            "sentinel +switch-master: writes on the new primary \(moved - startedAt) after SENTINEL FAILOVER; "
                + "\(counters.switchMasterMessages) switch messages, poll every 60 s")
        #expect(counters.switchMasterMessages >= 1)
        #expect(counters.failoversFromSwitchMessages == 1, "the message, not a query, noticed the switch")
        #expect(moved - startedAt < .seconds(10))
    }

    @Test func switchMasterForAnotherMasterIsIgnored() throws {
        // The parse is exercised through a resolver without sentinels.
        let counters = RedisClusterCounters()
        let resolver = RedisSentinelResolver(
            sentinels: [], masterName: "mine", configuration: RedisConfiguration(logsConnectionEvents: false),
            counters: counters, label: "test.sentinel.parse")
        resolver.receive(switchMasterMessage: "theirs 127.0.0.1 1 127.0.0.1 2")
        resolver.receive(switchMasterMessage: "mine 127.0.0.1 1 127.0.0.1")
        #expect(counters.switchMasterMessages == 0)
        resolver.receive(switchMasterMessage: "mine 127.0.0.1 1 127.0.0.1 2")
        #expect(counters.switchMasterMessages == 1)
    }
}
