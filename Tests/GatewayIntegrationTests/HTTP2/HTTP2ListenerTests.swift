import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import GatewayIO
@testable import HTTPProxy
@testable import PolicyModel

/// HTTP/2 from real clients (curl, nghttp) through an in-process gateway to the real HTTP/1.1
/// upstream (`scripts/upstream.py`): over TLS (ALPN h2) and h2c with prior knowledge.
@Suite(.serialized) struct HTTP2ListenerTests {
    static func listenerTLS() throws -> ListenerTLS {
        var settings = TLSServerSettings(certificate: TLSTestPKI.shared.ecdsa)
        settings.offersHTTP2 = true
        return ListenerTLS(context: try TLSServerContext(settings: settings), handshakeTimeout: .seconds(5))
    }

    static func curl(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try TLSTestPKI.run("/usr/bin/curl", ["--silent", "--show-error", "--max-time", "10"] + arguments)
    }

    static func echo(_ line: Substring) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    @Test func curlSpeaksHTTP2OverTLSAndTheUpstreamHearsHTTP11() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1, accessLog: true, tls: try Self.listenerTLS())
        defer { gateway.stop() }
        let url = "https://localhost:\(gateway.port)/h2/path?q=1"
        let (status, output) = try Self.curl([
            "--http2", "--cacert", TLSTestPKI.shared.caCertificate, "--write-out", "\\n%{http_version} %{http_code}\\n",
            url, url,
        ])
        #expect(status == 0, "\(output)")
        let lines = output.split(separator: "\n")
        #expect(lines.filter { $0 == "2 200" }.count == 2, "\(output)")
        let echo = try Self.echo(try #require(lines.first))
        #expect(echo["target"] as? String == "/h2/path?q=1")
        let headers = try #require(echo["headers"] as? [[String]])
        #expect(headers.first == ["Host", "localhost:\(gateway.port)"], "\(headers)")
        #expect(headers.contains(["X-Forwarded-Proto", "https"]))
        #expect(headers.contains { $0.first == "X-Request-Id" })
        let metrics = gateway.metrics.render()
        #expect(metrics.contains(#"attest_gateway_http2_connections_total{mode="tls"} 1"#), "\(metrics)")
        #expect(metrics.contains(#"attest_gateway_requests_by_protocol_total{protocol="h2"} 2"#), "\(metrics)")
        #expect(eventually { gateway.accessLogLines().filter { $0.contains(#""protocol":"h2""#) }.count == 2 })
    }

    @Test func anHTTP11ClientStillGetsHTTP11OnTheSameListener() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, tls: try Self.listenerTLS())
        defer { gateway.stop() }
        let (status, output) = try Self.curl([
            "--http1.1", "--cacert", TLSTestPKI.shared.caCertificate, "--write-out",
            "\\n%{http_version} %{http_code}\\n",
            "https://localhost:\(gateway.port)/one",
        ])
        #expect(status == 0, "\(output)")
        #expect(output.hasSuffix("1.1 200\n"), "\(output)")
    }

    @Test func h2cWithPriorKnowledgeStreamsABodyBothWays() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, h2c: true)
        defer { gateway.stop() }
        // 1 MiB up (many DATA frames, window updates as the upstream reads), 1 MiB down.
        let directory = try TemporaryDirectory()
        let bodyPath = directory.path + "/body"
        try Data(repeating: 0x61, count: 1 << 20).write(to: URL(fileURLWithPath: bodyPath))
        let (status, output) = try Self.curl([
            "--http2-prior-knowledge", "--data-binary", "@" + bodyPath, "--write-out",
            "\\n%{http_version} %{http_code}\\n",
            "http://127.0.0.1:\(gateway.port)/upload",
        ])
        #expect(status == 0, "\(output)")
        let lines = output.split(separator: "\n")
        #expect(lines.last == "2 200", "\(output)")
        let echo = try Self.echo(try #require(lines.first))
        #expect(echo["body_bytes"] as? Int == 1 << 20, "\(echo)")
        #expect(echo["method"] as? String == "POST")
        let (downloadStatus, download) = try Self.curl([
            "--http2-prior-knowledge", "--output", "/dev/null", "--write-out",
            "%{http_version} %{http_code} %{size_download}",
            "http://127.0.0.1:\(gateway.port)/big?size=1048576",
        ])
        #expect(downloadStatus == 0, "\(download)")
        #expect(download == "2 200 1048576", "\(download)")
    }

    @Test func aPlainListenerWithoutH2cAnswersThePrefaceAsHTTP11() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1)
        defer { gateway.stop() }
        let (status, output) = try Self.curl([
            "--http2-prior-knowledge", "http://127.0.0.1:\(gateway.port)/",
        ])
        #expect(status != 0, "h2c must be off unless the listener allows it: \(output)")
    }

    @Test func nghttpMultiplexesConcurrentStreams() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, h2c: true)
        defer { gateway.stop() }
        // Ten streams at once on one connection, one of them slow: the others are not held by it.
        var urls = ["http://127.0.0.1:\(gateway.port)/slow?delay=500"]
        for index in 0..<9 { urls.append("http://127.0.0.1:\(gateway.port)/fast/\(index)") }
        let (status, output) = try TLSTestPKI.run("/usr/bin/nghttp", ["-n", "-s", "-t", "10"] + urls)
        #expect(status == 0, "\(output)")
        // `-s` prints one line per stream: count the completed 200s.
        let completed = output.split(separator: "\n").filter { $0.contains("/fast/") || $0.contains("/slow") }
        #expect(completed.count == 10, "\(output)")
        let metrics = gateway.metrics.render()
        #expect(metrics.contains(#"attest_gateway_http2_streams_total 10"#), "\(metrics)")
    }

    @Test func aHungUpstreamTimesOutItsStreamOnlyWith504() throws {
        let upstream = try UpstreamProcess()
        var configuration = upstream.configuration
        configuration.responseTimeout = .milliseconds(300)
        let gateway = try TestGateway(upstreams: ["api": configuration], loops: 1, h2c: true)
        defer { gateway.stop() }
        let base = "http://127.0.0.1:\(gateway.port)"
        // Both streams on one connection: the hung one gets 504, the other its 200.
        let (status, output) = try TLSTestPKI.run(
            "/usr/bin/nghttp", ["-n", "-s", base + "/hang?hang=1", base + "/fine"])
        #expect(status == 0, "\(output)")
        let lines = output.split(separator: "\n")
        #expect(lines.contains { $0.contains("/hang?hang=1") && $0.contains(" 504 ") }, "\(output)")
        #expect(lines.contains { $0.contains("/fine") && $0.contains(" 200 ") }, "\(output)")
        #expect(
            gateway.metrics.render().contains(#"attest_gateway_upstream_errors_total{upstream="api",kind="timeout"} 1"#)
        )
    }

    @Test func aGRPCRequestIsRefusedWithAGRPCStatus() throws {
        let upstream = try UpstreamProcess()
        let routes = [RoutePolicy(name: "api", match: .init(pathPrefix: "/api/"), upstream: "api")]
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], routes: routes, loops: 1, h2c: true)
        defer { gateway.stop() }
        // No route for the path: the gateway's 404 `no_route` becomes grpc-status 12 with the code.
        let (status, output) = try Self.curl([
            "--http2-prior-knowledge", "--include", "-H", "content-type: application/grpc", "-H", "te: trailers",
            "--data-binary", "", "http://127.0.0.1:\(gateway.port)/pkg.Service/Method",
        ])
        #expect(status == 0, "\(output)")
        #expect(output.hasPrefix("HTTP/2 200"), "\(output)")
        #expect(output.contains("grpc-status: 12"), "\(output)")
        #expect(output.contains("grpc-message: no_route"), "\(output)")
        #expect(output.contains("content-type: application/grpc"), "\(output)")
    }
}
