import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import GatewayIO
@testable import HTTPProxy

/// TLS terminated by the proxy, on loopback: real clients (curl, openssl s_client, Python's
/// ssl), the real upstream (`scripts/upstream.py`), the server in-process.
@Suite(.serialized) struct ListenerTLSTests {
    private static func listenerTLS(handshakeTimeout: Duration = .seconds(5)) throws -> ListenerTLS {
        let pki = TLSTestPKI.shared
        let context = try TLSServerContext(settings: TLSServerSettings(certificate: pki.ecdsa))
        return ListenerTLS(context: context, handshakeTimeout: handshakeTimeout)
    }

    private static func curl(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try TLSTestPKI.run("/usr/bin/curl", ["--silent", "--show-error", "--http1.1", "--max-time", "5"] + arguments)
    }

    @Test func curlReachesTheUpstreamOverTLSWhichHearsHTTPS() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1, accessLog: true, tls: try Self.listenerTLS())
        defer { gateway.stop() }
        let url = "https://localhost:\(gateway.port)/tls/path?q=1"
        // Two requests on one connection: keep-alive works over TLS too.
        let (status, output) = try Self.curl([
            "--cacert", TLSTestPKI.shared.caCertificate, "--write-out", "\\n%{http_code} %{num_connects}\\n", url, url,
        ])
        #expect(status == 0, "\(output)")
        let lines = output.split(separator: "\n").map(String.init)
        let codes = lines.filter { $0.hasPrefix("200 ") }
        #expect(codes == ["200 1", "200 0"], "\(output)")
        let first = try #require(lines.first)
        let echo = try #require(try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])
        #expect(echo["target"] as? String == "/tls/path?q=1")
        let headers = try #require(echo["headers"] as? [[String]])
        #expect(headers.contains(["X-Forwarded-Proto", "https"]))
        let forwarded = headers.first { $0.first == "Forwarded" }?.last ?? ""
        #expect(forwarded.contains("proto=https"), "\(forwarded)")
        // The access log names the TLS version the transport negotiated (plain listeners: null).
        #expect(eventually { gateway.accessLogLines().contains { $0.contains(#""tls":"TLSv1.3""#) } })
    }

    @Test func plainHTTPOnATLSListenerIsClosedAsAFailedHandshake() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, tls: try Self.listenerTLS())
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        try client.send("GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        #expect(client.waitForClose(), "the connection must be closed")
        let failures = gateway.metrics.render()
        #expect(failures.contains(#"attest_gateway_tls_handshake_failures_total{reason="error"} 1"#), "\(failures)")
        #expect(eventually { gateway.server.openConnections == 0 })
    }

    @Test func aSilentClientIsClosedAtTheHandshakeTimeout() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1,
            tls: try Self.listenerTLS(handshakeTimeout: .milliseconds(300)))
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        let started = Date()
        #expect(client.waitForClose(), "the connection must be closed")
        #expect(Date().timeIntervalSince(started) < 3)
        #expect(
            gateway.metrics.render().contains(#"attest_gateway_tls_handshake_failures_total{reason="timeout"} 1"#))
    }

    @Test func truncatedClientHelloIsClosedCleanly() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1,
            tls: try Self.listenerTLS(handshakeTimeout: .milliseconds(500)))
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        // A TLS record header announcing a 512-byte handshake message, then a few bytes of it.
        try client.send([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03])
        #expect(client.waitForClose(), "the connection must be closed")
        #expect(eventually { gateway.server.openConnections == 0 })
        // The gateway still serves: a real handshake afterwards succeeds.
        let (status, output) = try Self.curl([
            "--cacert", TLSTestPKI.shared.caCertificate, "https://localhost:\(gateway.port)/after",
        ])
        #expect(status == 0, "\(output)")
    }

    @Test func tls11IsRefused() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, tls: try Self.listenerTLS())
        defer { gateway.stop() }
        let (status, output) = try TLSTestPKI.run(
            "/usr/bin/openssl",
            [
                "s_client", "-connect", "127.0.0.1:\(gateway.port)", "-tls1_1", "-CAfile",
                TLSTestPKI.shared.caCertificate,
            ],
            input: "")
        #expect(status != 0, "\(output)")
        #expect(output.contains("alert protocol version") || output.contains("unsupported protocol"), "\(output)")
    }
}
