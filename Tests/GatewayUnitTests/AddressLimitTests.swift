import GatewayTesting
import Testing

@testable import GatewayIO
@testable import HTTP1
@testable import PolicyModel

@Suite struct AddressRateLimiterTests {
    @Test func oneAddressExhaustsOnlyItsOwnBucket() {
        let limiter = AddressRateLimiter(ratePerSecond: 10, burst: 5)
        let t0: UInt64 = 1_000_000_000
        for _ in 0..<5 { #expect(limiter.admit("127.0.0.2", nowNanoseconds: t0) == .allowed) }
        #expect(limiter.admit("127.0.0.2", nowNanoseconds: t0) == .limited(retryAfterSeconds: 1))
        #expect(limiter.admit("127.0.0.3", nowNanoseconds: t0) == .allowed)
        // 100 ms refills one token at 10/s.
        #expect(limiter.admit("127.0.0.2", nowNanoseconds: t0 + 100_000_000) == .allowed)
        #expect(limiter.admit("127.0.0.2", nowNanoseconds: t0 + 100_000_000) != .allowed)
    }

    @Test func retryAfterFollowsTheRate() {
        let limiter = AddressRateLimiter(ratePerSecond: 1, burst: 1)
        #expect(limiter.admit("a", nowNanoseconds: 0) == .allowed)
        #expect(limiter.admit("a", nowNanoseconds: 0) == .limited(retryAfterSeconds: 1))
        limiter.update(ratePerSecond: 1, burst: 1)
        #expect(limiter.admit("a", nowNanoseconds: 1_000_000_000) == .allowed)
    }

    @Test func memoryStaysBoundedUnderManyAddresses() {
        let limiter = AddressRateLimiter(ratePerSecond: 1, burst: 2, capacity: 1_024)
        for i in 0..<20_000 {
            _ = limiter.admit("10.\(i >> 16).\((i >> 8) & 255).\(i & 255)", nowNanoseconds: 5)
        }
        #expect(limiter.trackedAddresses <= 1_024)
    }
}

@Suite struct AddressLedgerTests {
    @Test func capsEachAddressAndForgetsEmptyOnes() {
        let ledger = AddressLedger()
        #expect(ledger.tryAdd("a", 600, limit: 1_000))
        #expect(!ledger.tryAdd("a", 500, limit: 1_000), "all or nothing")
        #expect(ledger.held("a") == 600)
        #expect(ledger.tryAdd("b", 1_000, limit: 1_000))
        ledger.remove("a", 600)
        ledger.remove("b", 1_000)
        #expect(ledger.addressCount == 0)
    }
}

@Suite struct TrustedProxiesTests {
    @Test func networksParseAndContain() {
        let proxies = TrustedProxies(["10.0.0.0/8", "192.0.2.7", "fd00::/8"])
        #expect(proxies.contains("10.1.2.3"))
        #expect(!proxies.contains("11.0.0.1"))
        #expect(proxies.contains("192.0.2.7"))
        #expect(!proxies.contains("192.0.2.8"))
        #expect(proxies.contains("fd12::1"))
        #expect(!proxies.contains("fe80::1"))
        #expect(TrustedProxies.Network(parsing: "10.0.0.0/33") == nil)
        #expect(TrustedProxies.Network(parsing: "10.0.0/8") == nil)
        #expect(TrustedProxies.Network(parsing: "::/129") == nil)
    }

    @Test func clientIsTheRightmostUntrustedForwardedAddress() {
        let proxies = TrustedProxies(["10.0.0.0/8"])
        // Not from a trusted peer: the peer itself, whatever the header says.
        #expect(proxies.clientAddress(peer: "203.0.113.9", forwardedFor: ["1.2.3.4"]) == "203.0.113.9")
        // From the load balancer: the address it saw, ignoring what the client wrote before it.
        #expect(proxies.clientAddress(peer: "10.0.0.5", forwardedFor: ["6.6.6.6, 198.51.100.4"]) == "198.51.100.4")
        // Through two trusted hops.
        #expect(proxies.clientAddress(peer: "10.0.0.5", forwardedFor: ["198.51.100.4, 10.0.0.9"]) == "198.51.100.4")
        // Split over two header fields.
        #expect(proxies.clientAddress(peer: "10.0.0.5", forwardedFor: ["6.6.6.6", "198.51.100.4"]) == "198.51.100.4")
        // Garbage stops the walk at the last trusted hop's view.
        #expect(proxies.clientAddress(peer: "10.0.0.5", forwardedFor: ["198.51.100.4, nonsense"]) == "10.0.0.5")
        #expect(proxies.clientAddress(peer: "10.0.0.5", forwardedFor: []) == "10.0.0.5")
    }

    @Test func ipv6ClientsCountPerSlash64() {
        #expect(IPAddressBytes.limitKey("2001:db8:1:2:aaaa::1") == IPAddressBytes.limitKey("2001:db8:1:2:bbbb::9"))
        #expect(IPAddressBytes.limitKey("2001:db8:1:2::1") != IPAddressBytes.limitKey("2001:db8:1:3::1"))
        #expect(IPAddressBytes.limitKey("::ffff:192.0.2.1") == "192.0.2.1")
        #expect(IPAddressBytes.limitKey("192.0.2.1") == "192.0.2.1")
    }
}
