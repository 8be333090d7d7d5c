import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import GatewayIO
@testable import HTTPProxy

/// `proxy_protocol: true` listeners on loopback, with the real upstream (`scripts/upstream.py`
/// echoes the request headers): the header's source becomes the client for X-Forwarded-For,
/// the access log and per-address limits; connections without a valid header, late, or from
/// a peer outside `trusted_proxies` are closed and counted.
@Suite(.serialized) struct ProxyProtocolListenerTests {
    static let request = "GET /pp HTTP/1.1\r\nHost: api.example\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n"

    static func v1(_ source: String, port: Int = 51234) -> [UInt8] {
        Array("PROXY TCP4 \(source) 192.0.2.1 \(port) 443\r\n".utf8)
    }

    static func value(_ name: String, _ headers: [(String, String)]) -> [String] {
        headers.filter { $0.0.caseInsensitiveCompare(name) == .orderedSame }.map(\.1)
    }

    static func refusals(_ gateway: TestGateway, _ reason: String) -> Bool {
        gateway.metrics.render().contains(#"attest_gateway_proxy_protocol_refusals_total{reason="\#(reason)"} 1"#)
    }

    @Test func v1FromATrustedBalancerNamesTheClientUpstreamAndInTheAccessLog() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1, accessLog: true, proxyProtocol: true,
            trustedProxies: ["127.0.0.1/32"])
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        // Header and request in one segment: the header must be consumed exactly.
        try client.send(Self.v1("203.0.113.7") + Array(Self.request.utf8))
        let response = try client.readResponse()
        #expect(response.status == 200)
        let headers = try response.echoedHeaders()
        // The client's own X-Forwarded-For is not believed: 203.0.113.7 is not a trusted proxy.
        #expect(Self.value("X-Forwarded-For", headers) == ["203.0.113.7"])
        #expect(Self.value("Forwarded", headers) == ["for=203.0.113.7;proto=http;host=api.example"])
        // Keep-alive: the second request on the connection needs no header.
        try client.send("GET /second HTTP/1.1\r\nHost: api.example\r\n\r\n")
        #expect(try client.readResponse().status == 200)
        var lines: [String] = []
        #expect(
            eventually {
                lines = gateway.accessLogLines(); return lines.count >= 2
            })
        #expect(lines.allSatisfy { $0.contains(#""client":"203.0.113.7""#) }, "\(lines)")
    }

    @Test func v2SplitAcrossManyWritesIsReassembled() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1, accessLog: true, proxyProtocol: true)
        defer { gateway.stop() }
        let source: [UInt8] = [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [0x42]
        let header = ProxyProtocolSerializer.v2(
            .proxied(
                source: .init(address: .ipv6(source), port: 40000),
                destination: .init(address: .ipv6([UInt8](repeating: 0, count: 15) + [1]), port: 443)),
            tlvs: [(0x05, Array("vpce-0123".utf8))])
        let client = try TestHTTPClient(port: gateway.port)
        // Signature, version byte, length, addresses: every piece its own segment.
        var offset = 0
        for size in [5, 7, 1, 3, 20, 10] where offset < header.count {
            let end = min(offset + size, header.count)
            try client.send(Array(header[offset..<end]))
            offset = end
            usleep(30_000)
        }
        try client.send(Array(header[offset...]) + Array(Self.request.utf8))
        let response = try client.readResponse()
        #expect(response.status == 200)
        let headers = try response.echoedHeaders()
        #expect(Self.value("X-Forwarded-For", headers) == ["2001:db8::42"])
        #expect(Self.value("Forwarded", headers) == [#"for="[2001:db8::42]";proto=http;host=api.example"#])
        #expect(eventually { gateway.accessLogLines().contains { $0.contains(#""client":"2001:db8::42""#) } })
    }

    @Test func v2LocalKeepsTheSocketPeer() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, proxyProtocol: true)
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        try client.send(ProxyProtocolSerializer.v2(.socketPeer) + Array(Self.request.utf8))
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(Self.value("X-Forwarded-For", try response.echoedHeaders()) == ["127.0.0.1"])
    }

    @Test func aConnectionWithoutHeaderIsClosedAndCounted() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, proxyProtocol: true)
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        try client.send(Self.request)
        #expect(client.waitForClose(), "a request without PROXY header must be closed unanswered")
        #expect(eventually { Self.refusals(gateway, "not_proxy_protocol") })
        #expect(eventually { gateway.server.openConnections == 0 })
    }

    @Test func aHeaderFromAPeerOutsideTrustedProxiesIsRefused() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1, proxyProtocol: true, trustedProxies: ["10.0.0.0/8"])
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        // A spoofed header naming a "trusted" address: the socket peer (127.0.0.1) decides.
        try? client.send(Self.v1("10.0.0.1") + Array(Self.request.utf8))
        #expect(client.waitForClose())
        #expect(eventually { Self.refusals(gateway, "untrusted_peer") })
        #expect(eventually { gateway.server.openConnections == 0 })
    }

    @Test func aSlowHeaderIsClosedAtTheHeaderTimeout() throws {
        let upstream = try UpstreamProcess()
        var limits = GatewayLimits()
        limits.headerReadTimeout = .milliseconds(300)
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], limits: limits, loops: 1, proxyProtocol: true)
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        let started = Date()
        try client.send("PROXY TCP4 203.0.")
        #expect(client.waitForClose())
        let elapsed = Date().timeIntervalSince(started)
        #expect(elapsed >= 0.25 && elapsed < 3, "\(elapsed)")
        #expect(eventually { Self.refusals(gateway, "timeout") })
    }

    @Test func aMalformedHeaderIsRefusedWithItsCode() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, proxyProtocol: true)
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        try client.send("PROXY TCP4 203.0.113.7 192.0.2.1 99999 443\r\n" + Self.request)
        #expect(client.waitForClose())
        #expect(eventually { Self.refusals(gateway, "v1_invalid_port") })
    }

    @Test func aTrustedProxyBeforeTheBalancerKeepsItsForwardedFor() throws {
        // CDN (198.51.100.9, an L7 proxy that writes X-Forwarded-For) → L4 balancer (127.0.0.1).
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1, accessLog: true, proxyProtocol: true,
            trustedProxies: ["127.0.0.1/32", "198.51.100.0/24"])
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        try client.send(
            Self.v1("198.51.100.9")
                + Array(
                    "GET / HTTP/1.1\r\nHost: api.example\r\nX-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Proto: https\r\n\r\n"
                        .utf8))
        let response = try client.readResponse()
        #expect(response.status == 200)
        let headers = try response.echoedHeaders()
        #expect(Self.value("X-Forwarded-For", headers) == ["203.0.113.7, 198.51.100.9"])
        #expect(Self.value("X-Forwarded-Proto", headers) == ["https"])
        #expect(eventually { gateway.accessLogLines().contains { $0.contains(#""client":"203.0.113.7""#) } })
    }

    @Test func perAddressConnectionCapCountsTheClientNotTheBalancer() throws {
        let upstream = try UpstreamProcess()
        var limits = GatewayLimits()
        limits.maxConnectionsPerAddress = 1
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], limits: limits, loops: 1, proxyProtocol: true)
        defer { gateway.stop() }
        // Two clients through one balancer address: each has its own cap.
        let first = try TestHTTPClient(port: gateway.port)
        try first.send(Self.v1("203.0.113.1") + Array(Self.request.utf8))
        #expect(try first.readResponse().status == 200)
        let second = try TestHTTPClient(port: gateway.port)
        try second.send(Self.v1("203.0.113.2") + Array(Self.request.utf8))
        #expect(try second.readResponse().status == 200)
        // A second connection of the first client is over its cap.
        let third = try TestHTTPClient(port: gateway.port)
        try third.send(Self.v1("203.0.113.1") + Array(Self.request.utf8))
        let refused = try third.readResponse()
        #expect(refused.status == 429)
        #expect(eventually { gateway.server.openConnections == 2 })
    }

    @Test func theHeaderPrecedesTheTLSHandshake() throws {
        let upstream = try UpstreamProcess()
        let pki = TLSTestPKI.shared
        let context = try TLSServerContext(settings: TLSServerSettings(certificate: pki.ecdsa))
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1, accessLog: true,
            tls: ListenerTLS(context: context, handshakeTimeout: .seconds(5)), proxyProtocol: true)
        defer { gateway.stop() }
        // Python's ssl over a socket that first carries the PROXY header in clear.
        let script = """
            import socket, ssl, sys
            s = socket.create_connection(("127.0.0.1", \(gateway.port)), timeout=5)
            s.sendall(b"PROXY TCP4 203.0.113.77 192.0.2.1 40000 443\\r\\n")
            ctx = ssl.create_default_context(cafile="\(pki.caCertificate)")
            t = ctx.wrap_socket(s, server_hostname="localhost")
            t.sendall(b"GET /tls HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n")
            data = b""
            while True:
                chunk = t.recv(65536)
                if not chunk: break
                data += chunk
            sys.stdout.write(data.decode())
            """
        let (status, output) = try TLSTestPKI.run("/usr/bin/python3", ["-c", script])
        #expect(status == 0, "\(output)")
        #expect(output.hasPrefix("HTTP/1.1 200"), "\(output)")
        #expect(output.contains(#"["X-Forwarded-For", "203.0.113.77"]"#), "\(output)")
        #expect(output.contains(#"["X-Forwarded-Proto", "https"]"#), "\(output)")
        #expect(eventually { gateway.accessLogLines().contains { $0.contains(#""client":"203.0.113.77""#) } })
    }
}
