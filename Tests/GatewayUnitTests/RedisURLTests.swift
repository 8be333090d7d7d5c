import GatewayTesting
import Testing

@testable import RedisClient

@Suite struct RedisURLTests {
    @Test func parsesHostPortDatabaseAndPassword() throws {
        let url = try RedisURL(parsing: "redis://:s3cret@10.0.0.1:6380/2")
        #expect(url.address == .tcp(host: "10.0.0.1", port: 6380))
        #expect(url.password == "s3cret")
        #expect(url.database == 2)
        #expect(!url.description.contains("s3cret"))
    }

    @Test func defaultsPortAndDatabase() throws {
        let url = try RedisURL(parsing: "redis://localhost")
        #expect(url.address == .tcp(host: "localhost", port: 6379))
        #expect(url.database == 0)
    }

    @Test func parsesIPv6AndUnix() throws {
        #expect(try RedisURL(parsing: "redis://[::1]:7000/0").address == .tcp(host: "::1", port: 7000))
        let unix = try RedisURL(parsing: "unix:///run/redis.sock?db=3")
        #expect(unix.address == .unix(path: "/run/redis.sock"))
        #expect(unix.database == 3)
    }

    @Test(arguments: ["http://x:1", "redis://:70000", "redis://h:0", "redis://h/abc", "unix://relative", "redis://"])
    func rejects(_ text: String) {
        #expect(throws: RedisURLError.self) { try RedisURL(parsing: text) }
    }
}

@Suite struct RedisURLTopologyTests {
    @Test func aclUserAndPassword() throws {
        let url = try RedisURL(parsing: "redis://gateway:s3cret@10.0.0.1:6380/2")
        #expect(url.username == "gateway")
        #expect(url.password == "s3cret")
        #expect(url.topology == .node)
        #expect(url.description == "redis://gateway:***@10.0.0.1:6380/2")
    }

    @Test func passwordWithoutUserStaysTheDefaultUser() throws {
        let url = try RedisURL(parsing: "redis://:pw@h")
        #expect(url.username == nil)
        #expect(url.password == "pw")
    }

    @Test func clusterSeeds() throws {
        let url = try RedisURL(parsing: "redis-cluster://app:pw@10.0.0.1:7000,10.0.0.2:7001,[::1]/")
        #expect(
            url.topology
                == .cluster(seeds: [
                    RedisNodeAddress(host: "10.0.0.1", port: 7000), RedisNodeAddress(host: "10.0.0.2", port: 7001),
                    RedisNodeAddress(host: "::1", port: 6379),
                ]))
        #expect(url.username == "app")
        #expect(!url.description.contains("pw"))
    }

    @Test func sentinelMasterAndDatabase() throws {
        let url = try RedisURL(parsing: "redis-sentinel://s1,s2:26380,s3/mymaster/3")
        #expect(
            url.topology
                == .sentinel(
                    sentinels: [
                        RedisNodeAddress(host: "s1", port: 26379), RedisNodeAddress(host: "s2", port: 26380),
                        RedisNodeAddress(host: "s3", port: 26379),
                    ],
                    masterName: "mymaster"))
        #expect(url.database == 3)
        #expect(url.description == "redis-sentinel://s1:26379,s2:26380,s3:26379/mymaster/3")
    }

    @Test func passwordFromASecretReplacesTheURLs() throws {
        let bare = try RedisURL(parsing: "redis://gateway@h")
        #expect(bare.username == "gateway")
        #expect(bare.password == nil, "a user alone: the password comes from a secret")
        let url = bare.withPassword("from-file")
        #expect(url.username == "gateway")
        #expect(url.password == "from-file")
    }

    @Test(arguments: [
        "redis-cluster://h:1/2", "redis-sentinel://s1/", "redis-sentinel://s1", "redis://a:1,b:2",
        "rediss-cluster://h:1/2",
        "redis-cluster://h:1,,h:2",
    ])
    func rejectsTopologyErrors(_ text: String) {
        #expect(throws: RedisURLError.self) { try RedisURL(parsing: text) }
    }

    @Test func redissSchemesAreTheSameFormsOverTLS() throws {
        let node = try RedisURL(parsing: "rediss://app:pw@redis.example:6380/2")
        #expect(node.usesTLS && node.address == .tcp(host: "redis.example", port: 6380) && node.database == 2)
        #expect(node.description == "rediss://app:***@redis.example:6380/2")
        let cluster = try RedisURL(parsing: "rediss-cluster://a:7000,b:7001/")
        #expect(cluster.usesTLS && cluster.description == "rediss-cluster://a:7000,b:7001/")
        let sentinel = try RedisURL(parsing: "rediss-sentinel://s1,s2:26380/mymaster")
        #expect(sentinel.usesTLS && sentinel.description == "rediss-sentinel://s1:26379,s2:26380/mymaster/0")
        #expect(try RedisURL(parsing: "redis://h").usesTLS == false)
        #expect(throws: RedisURLError.self) { try RedisURL(parsing: "rediss+unix:///tmp/r.sock") }
    }

    @Test func errorsNeverQuoteThePassword() {
        do {
            _ = try RedisURL(parsing: "redis://u:hunter2@h:99999")
            Issue.record("must throw")
        } catch {
            #expect(!error.description.contains("hunter2"))
        }
    }
}
