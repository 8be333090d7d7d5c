import GatewayTesting
import Testing

@testable import HTTP1
@testable import KeyStore
@testable import RedisClient

/// The pure parts of the Cluster / Sentinel layer: no sockets.
@Suite struct RedisHashSlotTests {
    @Test func crc16MatchesTheClusterSpecificationCheckValue() {
        #expect(RedisHashSlot.crc16(Array("123456789".utf8)) == 0x31C3)
    }

    @Test func slotsMatchRedisClusterKeyslot() {
        // Values from `CLUSTER KEYSLOT` on redis-server 7.0.
        #expect(RedisHashSlot.slot(of: Array("foo".utf8)) == 12182)
        #expect(RedisHashSlot.slot(of: Array("bar".utf8)) == 5061)
        #expect(RedisHashSlot.slot(of: Array("".utf8)) == 0)
    }

    @Test func hashTagIsTheFirstNonEmptyBraces() {
        #expect(RedisHashSlot.hashTag(of: Array("appattest:key:{abc}".utf8)) == Array("abc".utf8)[...])
        #expect(RedisHashSlot.hashTag(of: Array("{user1000}.following".utf8)) == Array("user1000".utf8)[...])
        // Empty braces: the whole key is hashed.
        #expect(RedisHashSlot.hashTag(of: Array("foo{}{bar}".utf8)) == Array("foo{}{bar}".utf8)[...])
        // Only the first `{` and the first `}` after it count.
        #expect(RedisHashSlot.hashTag(of: Array("foo{{bar}}zap".utf8)) == Array("{bar".utf8)[...])
        #expect(RedisHashSlot.hashTag(of: Array("no-close{abc".utf8)) == Array("no-close{abc".utf8)[...])
    }

    @Test func everyKeyOfOneOperationSharesItsSlot() {
        let keyID = "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmE="
        #expect(
            RedisHashSlot.slot(of: RedisStore.keyRecordKey(keyID)) == RedisHashSlot.slot(of: Array(keyID.utf8))
        )
    }
}

@Suite struct RedisRedirectTests {
    @Test func parsesMovedAndAsk() {
        #expect(
            RedisRedirect(errorText: "MOVED 3999 127.0.0.1:6381", currentHost: "x")
                == .moved(slot: 3999, node: RedisNodeAddress(host: "127.0.0.1", port: 6381)))
        #expect(
            RedisRedirect(errorText: "ASK 3999 10.0.0.2:7000", currentHost: "x")
                == .ask(slot: 3999, node: RedisNodeAddress(host: "10.0.0.2", port: 7000)))
    }

    @Test func emptyHostMeansTheNodeThatAnswered() {
        #expect(
            RedisRedirect(errorText: "MOVED 1 :7001", currentHost: "10.1.1.1")
                == .moved(slot: 1, node: RedisNodeAddress(host: "10.1.1.1", port: 7001)))
    }

    @Test func ipv6EndpointsWithoutBrackets() {
        #expect(
            RedisRedirect(errorText: "MOVED 5 ::1:7001", currentHost: "x")
                == .moved(slot: 5, node: RedisNodeAddress(host: "::1", port: 7001)))
    }

    @Test func retryLaterCodes() {
        #expect(
            RedisRedirect(errorText: "TRYAGAIN Multiple keys request during rehashing of slot", currentHost: "x")
                == .retryLater(code: "TRYAGAIN"))
        #expect(
            RedisRedirect(errorText: "CLUSTERDOWN The cluster is down", currentHost: "x")
                == .retryLater(code: "CLUSTERDOWN"))
    }

    @Test(arguments: ["ERR wrong", "MOVED", "MOVED x 1.2.3.4:5", "MOVED 16384 h:1", "ASK 1 nohostport", "MOVED 1 h:0"])
    func othersAreNoRedirect(_ text: String) {
        #expect(RedisRedirect(errorText: text, currentHost: "h") == nil)
    }
}

@Suite struct RedisRedirectPolicyTests {
    let node = RedisNodeAddress(host: "127.0.0.1", port: 7000)
    let other = RedisNodeAddress(host: "127.0.0.1", port: 7001)

    @Test func repliesThatAreNoRedirectComplete() {
        let policy = RedisRedirectPolicy()
        #expect(policy.action(errorText: nil, from: self.node, attempt: 1) == .complete)
        #expect(policy.action(errorText: "NOSCRIPT x", from: self.node, attempt: 1) == .complete)
    }

    @Test func movedAndAskResend() {
        let policy = RedisRedirectPolicy()
        #expect(
            policy.action(errorText: "MOVED 12 127.0.0.1:7001", from: self.node, attempt: 1)
                == .moved(slot: 12, node: self.other))
        #expect(
            policy.action(errorText: "ASK 12 127.0.0.1:7001", from: self.node, attempt: 2) == .ask(node: self.other))
    }

    @Test func retriesBackOffThenFail() {
        let policy = RedisRedirectPolicy(
            maximumAttempts: 4, initialRetryDelay: .milliseconds(10), maximumRetryDelay: .milliseconds(25))
        #expect(
            policy.action(errorText: "TRYAGAIN x", from: self.node, attempt: 1)
                == .retry(after: .milliseconds(10), refresh: false))
        #expect(
            policy.action(errorText: "CLUSTERDOWN x", from: self.node, attempt: 2)
                == .retry(after: .milliseconds(20), refresh: true))
        #expect(
            policy.action(errorText: "TRYAGAIN x", from: self.node, attempt: 3)
                == .retry(after: .milliseconds(25), refresh: false))
        guard case .fail(let error) = policy.action(errorText: "MOVED 1 127.0.0.1:7001", from: self.node, attempt: 4)
        else {
            Issue.record("the fourth attempt must fail")
            return
        }
        #expect(error.code == "redis_too_many_redirects")
        #expect(error.storeError.kind == .unavailable)
    }

    @Test func unassignedSlotRetriesWithRefreshThenFails() {
        let policy = RedisRedirectPolicy(maximumAttempts: 2)
        #expect(policy.actionForUnassignedSlot(7, attempt: 1) == .retry(after: .milliseconds(20), refresh: true))
        #expect(policy.actionForUnassignedSlot(7, attempt: 2) == .fail(.slotUnassigned(7)))
    }
}

@Suite struct RedisSlotMapTests {
    static func node(_ host: String, _ port: Int64, _ id: String = "id") -> RedisReply {
        .array([.bulk(Array(host.utf8)), .integer(port), .bulk(Array(id.utf8))])
    }

    @Test func parsesClusterSlots() throws {
        let reply = RedisReply.array([
            .array([.integer(0), .integer(5460), Self.node("127.0.0.1", 7000), Self.node("127.0.0.1", 7003)]),
            .array([.integer(5461), .integer(10922), Self.node("127.0.0.1", 7001)]),
            .array([.integer(10923), .integer(16383), Self.node("", 7002)]),
        ])
        let map = try RedisSlotMap(clusterSlots: reply, seedHost: "10.9.9.9")
        #expect(map.primaries.count == 3)
        #expect(map.primary(forSlot: 0) == RedisNodeAddress(host: "127.0.0.1", port: 7000))
        #expect(map.primary(forSlot: 5461) == RedisNodeAddress(host: "127.0.0.1", port: 7001))
        #expect(map.primary(forSlot: 16383) == RedisNodeAddress(host: "10.9.9.9", port: 7002), "empty host = seed")
        #expect(map.unassignedSlotCount == 0)
    }

    @Test func parsesClusterShardsAndSkipsReplicasAndFailedPrimaries() throws {
        func nodeMap(_ port: Int64, role: String, health: String = "online") -> RedisReply {
            .array([
                .bulk(Array("id".utf8)), .bulk(Array("abc".utf8)),
                .bulk(Array("port".utf8)), .integer(port),
                .bulk(Array("ip".utf8)), .bulk(Array("127.0.0.1".utf8)),
                .bulk(Array("endpoint".utf8)), .bulk(Array("127.0.0.1".utf8)),
                .bulk(Array("role".utf8)), .bulk(Array(role.utf8)),
                .bulk(Array("health".utf8)), .bulk(Array(health.utf8)),
            ])
        }
        func shard(_ slots: [Int64], _ nodes: [RedisReply]) -> RedisReply {
            .array([
                .bulk(Array("slots".utf8)), .array(slots.map { .integer($0) }),
                .bulk(Array("nodes".utf8)), .array(nodes),
            ])
        }
        let reply = RedisReply.array([
            shard([0, 100, 200, 8000], [nodeMap(7003, role: "replica"), nodeMap(7000, role: "master")]),
            shard([8001, 16383], [nodeMap(7001, role: "master", health: "fail"), nodeMap(7004, role: "replica")]),
            shard([], [nodeMap(7005, role: "master")]),
        ])
        let map = try RedisSlotMap(clusterShards: reply, seedHost: "h")
        #expect(map.primaries == [RedisNodeAddress(host: "127.0.0.1", port: 7000)])
        #expect(map.primary(forSlot: 50) == RedisNodeAddress(host: "127.0.0.1", port: 7000))
        #expect(map.primary(forSlot: 150) == nil, "gap between ranges")
        #expect(map.primary(forSlot: 8000) == RedisNodeAddress(host: "127.0.0.1", port: 7000))
        #expect(map.primary(forSlot: 9000) == nil, "its primary failed: no replica is asked")
        #expect(map.unassignedSlotCount == 99 + (16383 - 8000))
    }

    @Test func movedUpdatesOneSlot() throws {
        var map = try RedisSlotMap(
            clusterSlots: .array([.array([.integer(0), .integer(16383), Self.node("a", 1)])]), seedHost: "h")
        map.assign(slot: 42, to: RedisNodeAddress(host: "b", port: 2))
        #expect(map.primary(forSlot: 42) == RedisNodeAddress(host: "b", port: 2))
        #expect(map.primary(forSlot: 43) == RedisNodeAddress(host: "a", port: 1))
    }

    @Test(arguments: [
        RedisReply.status("OK"),
        .array([.array([.integer(0), .integer(16384), RedisSlotMapTests.node("a", 1)])]),
        .array([.array([.integer(5), .integer(4), RedisSlotMapTests.node("a", 1)])]),
        .array([.array([.integer(0), .integer(1), .array([.bulk(Array("a".utf8)), .integer(0)])])]),
        .array([.array([.integer(0), .integer(1)])]),
    ])
    func rejectsMalformedClusterSlots(_ reply: RedisReply) {
        #expect(throws: RedisClusterError.self) { try RedisSlotMap(clusterSlots: reply, seedHost: "h") }
    }
}
