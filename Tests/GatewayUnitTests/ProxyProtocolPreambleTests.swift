import GatewayTesting
import Testing

@testable import GatewayIO
@testable import HTTPProxy
@testable import PolicyModel

/// The PROXY protocol accept phase as a value: trust, peeks, deadline and end of file,
/// without sockets (`ProxyHeaderReader` executes it; `ProxyProtocolListenerTests` on sockets).
@Suite struct ProxyProtocolPreambleTests {
    static let v1 = Array("PROXY TCP4 203.0.113.7 192.0.2.1 51234 443\r\n".utf8)
    static let request = Array("GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8)

    @Test func aHeaderFollowedByARequestConsumesExactlyTheHeader() {
        var preamble = ProxyProtocolPreamble()
        #expect(preamble.accepted(peer: "10.0.0.5", trustedProxies: TrustedProxies([])) == .waitForMore)
        let action = preamble.peeked((Self.v1 + Self.request)[...])
        #expect(action == .consume(count: Self.v1.count, clientAddress: "203.0.113.7"))
        // Done: later events change nothing (the reader has handed the socket on).
        #expect(preamble.deadlinePassed() == .waitForMore)
        #expect(preamble.endOfFile() == .waitForMore)
    }

    @Test func aHeaderArrivingByteByByteWaitsThenConsumes() {
        var preamble = ProxyProtocolPreamble()
        let v2 = ProxyProtocolSerializer.v2(
            .proxied(
                source: .init(
                    address: .ipv6([0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [7]), port: 1),
                destination: .init(address: .ipv6([UInt8](repeating: 0, count: 15) + [1]), port: 443)),
            tlvs: [(0xEA, [1, 2, 3])])
        for end in 1..<v2.count {
            #expect(preamble.peeked(v2[0..<end]) == .waitForMore, "\(end) bytes")
        }
        #expect(preamble.peeked((v2 + Self.request)[...]) == .consume(count: v2.count, clientAddress: "2001:db8::7"))
    }

    @Test func localAndUnknownKeepTheSocketPeer() {
        var local = ProxyProtocolPreamble()
        let header = ProxyProtocolSerializer.v2(.socketPeer)
        #expect(local.peeked(header[...]) == .consume(count: header.count, clientAddress: nil))
        var unknown = ProxyProtocolPreamble()
        let v1 = Array("PROXY UNKNOWN\r\n".utf8)
        #expect(unknown.peeked(v1[...]) == .consume(count: v1.count, clientAddress: nil))
    }

    @Test func withTrustedProxiesOnlyTheirPeersMaySendAHeader() {
        let proxies = TrustedProxies(["10.0.0.0/8", "2001:db8::/32"])
        var inside = ProxyProtocolPreamble()
        #expect(inside.accepted(peer: "10.1.2.3", trustedProxies: proxies) == .waitForMore)
        var insideV6 = ProxyProtocolPreamble()
        #expect(insideV6.accepted(peer: "2001:db8::1", trustedProxies: proxies) == .waitForMore)
        var outside = ProxyProtocolPreamble()
        #expect(outside.accepted(peer: "192.0.2.9", trustedProxies: proxies) == .refuse(.untrustedPeer))
        // Refused once: a header that follows is not believed.
        #expect(outside.peeked(Self.v1[...]) == .waitForMore)
        #expect(ProxyProtocolPreamble.Refusal.untrustedPeer.code == "untrusted_peer")
    }

    @Test func aRequestWithoutHeaderIsRefusedAtItsFirstByte() {
        var preamble = ProxyProtocolPreamble()
        #expect(preamble.peeked(Self.request[0..<1]) == .refuse(.header(.notProxyProtocol)))
        #expect(ProxyProtocolPreamble.Refusal.header(.notProxyProtocol).code == "not_proxy_protocol")
        var tls = ProxyProtocolPreamble()
        // A TLS ClientHello where the header should be.
        #expect(tls.peeked([0x16, 0x03, 0x01][...]) == .refuse(.header(.notProxyProtocol)))
    }

    @Test func malformedHeadersAreRefusedWithTheParsersCode() {
        var preamble = ProxyProtocolPreamble()
        let action = preamble.peeked(Array("PROXY TCP4 1.2.3.4 5.6.7.8 99999 1\r\n".utf8)[...])
        #expect(action == .refuse(.header(.v1InvalidPort)))
    }

    @Test func deadlineAndEarlyCloseRefuseAnIncompleteHeader() {
        var slow = ProxyProtocolPreamble()
        #expect(slow.peeked(Self.v1[0..<10]) == .waitForMore)
        #expect(slow.deadlinePassed() == .refuse(.timeout))
        #expect(ProxyProtocolPreamble.Refusal.timeout.code == "timeout")
        var closed = ProxyProtocolPreamble()
        #expect(closed.peeked(Self.v1[0..<10]) == .waitForMore)
        #expect(closed.endOfFile() == .refuse(.closedEarly))
        #expect(ProxyProtocolPreamble.Refusal.closedEarly.code == "closed_early")
    }

    @Test func thePeekCoversTheLongestHeader() {
        let preamble = ProxyProtocolPreamble(maximumV2Length: 4096)
        #expect(preamble.peekLimit == 16 + 4096)
        #expect(ProxyProtocolPreamble(maximumV2Length: 16).peekLimit == ProxyProtocolParser.maximumV1Length)
    }
}
