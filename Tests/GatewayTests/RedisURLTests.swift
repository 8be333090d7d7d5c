import Testing

@testable import Gateway

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
