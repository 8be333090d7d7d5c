import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import HTTP1
@testable import HTTPProxy
@testable import PolicyModel

/// `trusted_proxies` on a plain listener, on loopback (the peer is 127.0.0.1): what the
/// upstream receives in X-Forwarded-For, -Proto, -Host and Forwarded, and which client the
/// access log names.
@Suite(.serialized) struct TrustedProxiesForwardingTests {
    static let spoofed =
        "GET /f HTTP/1.1\r\nHost: api.example\r\nX-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Proto: https\r\n"
        + "X-Forwarded-Host: evil.example\r\nForwarded: for=203.0.113.7;proto=https\r\n\r\n"

    static func value(_ name: String, _ headers: [(String, String)]) -> [String] {
        headers.filter { $0.0.caseInsensitiveCompare(name) == .orderedSame }.map(\.1)
    }

    @Test func anUntrustedPeersForwardingFieldsAreReplaced() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1, accessLog: true, trustedProxies: ["10.0.0.0/8"])
        defer { gateway.stop() }
        let response = try TestHTTPClient.request(port: gateway.port, Self.spoofed)
        #expect(response.status == 200)
        let headers = try response.echoedHeaders()
        #expect(Self.value("X-Forwarded-For", headers) == ["127.0.0.1"])
        #expect(Self.value("X-Forwarded-Proto", headers) == ["http"])
        #expect(Self.value("X-Forwarded-Host", headers) == ["api.example"])
        #expect(Self.value("Forwarded", headers) == ["for=127.0.0.1;proto=http;host=api.example"])
        #expect(eventually { gateway.accessLogLines().contains { $0.contains(#""client":"127.0.0.1""#) } })
    }

    @Test func withoutTrustedProxiesEveryPeerIsUntrusted() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1)
        defer { gateway.stop() }
        let headers = try TestHTTPClient.request(port: gateway.port, Self.spoofed).echoedHeaders()
        #expect(Self.value("X-Forwarded-For", headers) == ["127.0.0.1"])
        #expect(Self.value("X-Forwarded-Proto", headers) == ["http"])
    }

    @Test func aTrustedPeersFieldsAreKeptAndAppendedTo() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1, accessLog: true, trustedProxies: ["127.0.0.1/32"])
        defer { gateway.stop() }
        let response = try TestHTTPClient.request(port: gateway.port, Self.spoofed)
        #expect(response.status == 200)
        let headers = try response.echoedHeaders()
        #expect(Self.value("X-Forwarded-For", headers) == ["203.0.113.7, 127.0.0.1"])
        #expect(Self.value("X-Forwarded-Proto", headers) == ["https"])
        #expect(Self.value("X-Forwarded-Host", headers) == ["evil.example"])
        #expect(
            Self.value("Forwarded", headers) == [
                "for=203.0.113.7;proto=https, for=127.0.0.1;proto=http;host=api.example"
            ])
        // Logs and per-client limits name the right-most untrusted hop.
        #expect(eventually { gateway.accessLogLines().contains { $0.contains(#""client":"203.0.113.7""#) } })
    }

    @Test func ambiguousFieldsFromATrustedPeerAreRefused() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1, trustedProxies: ["127.0.0.1/32"])
        defer { gateway.stop() }
        for fields in [
            "X-Forwarded-Proto: https\r\nX-Forwarded-Proto: http\r\n", "X-Forwarded-Host: a\r\nX-Forwarded-Host: b\r\n",
            "X-Forwarded-Proto: gopher\r\n", "X-Forwarded-Host: a, b\r\n",
        ] {
            let response = try TestHTTPClient.request(
                port: gateway.port, "GET / HTTP/1.1\r\nHost: api.example\r\n\(fields)\r\n")
            #expect(response.status == 400, "\(fields)")
            #expect(try response.json()["error"] as? String == "invalid_forwarded_header", "\(fields)")
            #expect(response.headers["Connection"] == "close")
        }
        // Several X-Forwarded-For lines are one list: accepted.
        let list = try TestHTTPClient.request(
            port: gateway.port,
            "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 203.0.113.1\r\nX-Forwarded-For: 203.0.113.2\r\n\r\n")
        #expect(list.status == 200)
        #expect(Self.value("X-Forwarded-For", try list.echoedHeaders()) == ["203.0.113.1, 203.0.113.2, 127.0.0.1"])
    }

    @Test func theSameFieldsFromAnUntrustedPeerAreSimplyReplaced() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1)
        defer { gateway.stop() }
        let response = try TestHTTPClient.request(
            port: gateway.port,
            "GET / HTTP/1.1\r\nHost: api.example\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Proto: http\r\n\r\n")
        #expect(response.status == 200)
        #expect(Self.value("X-Forwarded-Proto", try response.echoedHeaders()) == ["http"])
    }

    /// Issue 29: a client's X-Real-IP is replaced by its address, its certificate headers are
    /// removed, and so are the names `strip_client_headers` adds, from the next request after a
    /// reload.
    @Test func headersOtherProxiesSetAreReplacedOrRemoved() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1)
        defer { gateway.stop() }
        let request =
            "GET /f HTTP/1.1\r\nHost: api.example\r\nX-Real-IP: 6.6.6.6\r\nX-Forwarded-Client-Cert: Hash=00\r\n"
            + "x-ssl-client-s-dn: CN=admin\r\nX-Client-Cert: MIIB\r\nClient-Cert: :MIIB:\r\n"
            + "Client-Cert-Chain: :MIIB:\r\nX-Company-User: admin\r\n\r\n"
        let before = try TestHTTPClient.request(port: gateway.port, request).echoedHeaders()
        #expect(Self.value("X-Real-IP", before) == ["127.0.0.1"], "\(before)")
        for name in [
            "X-Forwarded-Client-Cert", "X-SSL-Client-S-DN", "X-Client-Cert", "Client-Cert", "Client-Cert-Chain",
        ] {
            #expect(Self.value(name, before).isEmpty, "\(name): \(before)")
        }
        #expect(Self.value("X-Company-User", before) == ["admin"])

        var policy = GatewayPolicy(listen: [], upstreams: ["api": upstream.configuration], routes: [])
        policy.stripClientHeaders = ["X-Company-*"]
        try gateway.server.install(ServingConfiguration(policy: policy, gates: [:], accessLogKeyID: .prefix))
        let after = try TestHTTPClient.request(port: gateway.port, request).echoedHeaders()
        #expect(Self.value("X-Company-User", after).isEmpty, "\(after)")
        #expect(Self.value("X-Real-IP", after) == ["127.0.0.1"])
    }

    /// From a trusted peer, X-Real-IP names the client the access log names (the right-most
    /// untrusted X-Forwarded-For hop), whatever X-Real-IP the peer sent.
    @Test func aTrustedPeersXRealIPIsTheClientItsForwardedForNames() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1, trustedProxies: ["127.0.0.1/32"])
        defer { gateway.stop() }
        let headers = try TestHTTPClient.request(
            port: gateway.port,
            "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 203.0.113.7\r\nX-Real-IP: 6.6.6.6\r\n\r\n"
        ).echoedHeaders()
        #expect(Self.value("X-Real-IP", headers) == ["203.0.113.7"], "\(headers)")
        #expect(Self.value("X-Forwarded-For", headers) == ["203.0.113.7, 127.0.0.1"])
    }
}
