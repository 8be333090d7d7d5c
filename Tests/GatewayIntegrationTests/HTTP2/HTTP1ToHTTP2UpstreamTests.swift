import Foundation
import GatewayTesting
import Testing

@testable import GatewayIO
@testable import HTTPProxy
@testable import PolicyModel

/// HTTP/1.1 clients (curl `--http1.1`) through the gateway's plain listener to an `h2c`
/// upstream (`scripts/h2/goaway_upstream.py`, Python h2): requests become streams on the loop's
/// HTTP/2 pool (`HTTP1ToHTTP2UpstreamExchange`), bodies stream both ways, responses without a
/// length come back chunked with their trailers, and the client's connection is kept alive.
@Suite(.serialized, .timeLimit(.minutes(2))) struct HTTP1ToHTTP2UpstreamTests {
    static func curl(_ arguments: [String]) throws -> String {
        let (status, output) = try TLSTestPKI.run(
            "/usr/bin/curl", ["-sS", "--http1.1", "--max-time", "20"] + arguments)
        #expect(status == 0, "\(output)")
        return output
    }

    @Test func aGetAndKeepAliveRequestsAreStreamsOnOneUpstreamConnection() throws {
        let upstream = try SheddingUpstreamProcess(mode: "plain")
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration()], loops: 1)
        defer { gateway.stop() }
        // Two requests on one client connection (curl reuses it): both answered, as streams 1
        // and 3 of the same upstream connection.
        let output = try Self.curl([
            "-w", " %{http_code} %{num_connects}\n", "http://127.0.0.1:\(gateway.port)/a",
            "http://127.0.0.1:\(gateway.port)/b",
        ])
        let lines = output.split(separator: "\n").map(String.init)
        #expect(
            lines == ["conn=1 stream=1 method=GET body=0 200 1", "conn=1 stream=3 method=GET body=0 200 0"], "\(output)"
        )
        #expect(Self.metric(gateway, #"attest_gateway_http2_upstream_streams_total{upstream="api"}"#) == 2)
        let events = upstream.stop()
        #expect(!events.contains("open 2"), "\(events)")
    }

    /// 1,000,000 bytes up in a chunked request, the same bytes down in a response without a
    /// length: chunked to the client, with the upstream's trailer when the client asked for
    /// trailers (`TE: trailers`).
    @Test func aChunkedMegabyteGoesUpAndComesBackChunkedWithTrailers() throws {
        let upstream = try SheddingUpstreamProcess(mode: "plain")
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration()], loops: 1)
        defer { gateway.stop() }
        let directory = try TemporaryDirectory()
        var random = SystemRandomNumberGenerator()
        let body = Data((0..<1_000_000).map { _ in UInt8.random(in: 0...255, using: &random) })
        let bodyPath = directory.path + "/body.bin"
        let outPath = directory.path + "/out.bin"
        let headersPath = directory.path + "/headers.txt"
        try body.write(to: URL(fileURLWithPath: bodyPath))
        let status = try Self.curl([
            "-H", "Transfer-Encoding: chunked", "-H", "TE: trailers", "--data-binary", "@\(bodyPath)",
            "-o", outPath, "-D", headersPath, "-w", "%{http_code}", "http://127.0.0.1:\(gateway.port)/echo",
        ])
        #expect(status == "200")
        let echoed = try Data(contentsOf: URL(fileURLWithPath: outPath))
        #expect(echoed.count == body.count)
        #expect(echoed == body)
        let headers = try String(contentsOfFile: headersPath, encoding: .utf8).lowercased()
        print("h1-to-h2 echo headers: \(headers.debugDescription)")
        #expect(headers.contains("transfer-encoding: chunked"), "\(headers)")
        #expect(headers.contains("x-body-bytes: 1000000"), "\(headers)")
        _ = upstream.stop()
    }

    /// A megabyte with a `Content-Length` up; the echo comes back whole.
    @Test func aMegabyteWithContentLengthIsEchoed() throws {
        let upstream = try SheddingUpstreamProcess(mode: "plain")
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration()], loops: 1)
        defer { gateway.stop() }
        let directory = try TemporaryDirectory()
        let body = Data(repeating: 0x61, count: 1_000_000)
        let bodyPath = directory.path + "/body.bin"
        let outPath = directory.path + "/out.bin"
        try body.write(to: URL(fileURLWithPath: bodyPath))
        let status = try Self.curl([
            "--data-binary", "@\(bodyPath)", "-o", outPath, "-w", "%{http_code}",
            "http://127.0.0.1:\(gateway.port)/echo",
        ])
        #expect(status == "200")
        #expect(try Data(contentsOf: URL(fileURLWithPath: outPath)) == body)
        _ = upstream.stop()
    }

    /// A client that sends and reads slowly (curl `--limit-rate`, both ways): the bytes wait in
    /// the windows and socket buffers, none is lost or reordered, and a HEAD on the same
    /// connection afterwards has its head only.
    @Test func aSlowClientGetsEveryByteAndTheConnectionServesOn() throws {
        let upstream = try SheddingUpstreamProcess(mode: "plain")
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration()], loops: 1)
        defer { gateway.stop() }
        let directory = try TemporaryDirectory()
        var random = SystemRandomNumberGenerator()
        let body = Data((0..<600_000).map { _ in UInt8.random(in: 0...255, using: &random) })
        let bodyPath = directory.path + "/body.bin"
        let outPath = directory.path + "/out.bin"
        try body.write(to: URL(fileURLWithPath: bodyPath))
        let output = try Self.curl([
            "--limit-rate", "1M", "--data-binary", "@\(bodyPath)", "-o", outPath, "-w", "%{http_code}\n",
            "http://127.0.0.1:\(gateway.port)/echo", "--next", "-I", "-w", "%{http_code} %{num_connects}",
            "http://127.0.0.1:\(gateway.port)/head",
        ])
        #expect(try Data(contentsOf: URL(fileURLWithPath: outPath)) == body)
        #expect(output.hasPrefix("200\n"), "\(output)")
        #expect(output.hasSuffix("200 0"), "\(output)")
        _ = upstream.stop()
    }

    /// The upstream's GOAWAY on its first connection: the HTTP/1.1 request is sent again on a
    /// new connection once, and answered.
    @Test func anUnprocessedStreamIsRetriedForAnHTTP1Client() throws {
        let upstream = try SheddingUpstreamProcess(mode: "goaway_first")
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration()], loops: 1)
        defer { gateway.stop() }
        let output = try Self.curl(["-w", " %{http_code}", "-d", "hello", "http://127.0.0.1:\(gateway.port)/x"])
        #expect(output == "conn=2 stream=1 method=POST body=5 200", "\(output)")
        #expect(Self.metric(gateway, #"attest_gateway_http2_upstream_retries_total{upstream="api"}"#) == 1)
        _ = upstream.stop()
    }

    /// REFUSED_STREAM on the first stream of a POST whose body went out: the body is still
    /// whole in the exchange (under 64 KiB), so the request goes again once.
    @Test func aRefusedPostIsRetriedWithItsBody() throws {
        let upstream = try SheddingUpstreamProcess(mode: "refuse_first")
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration()], loops: 1)
        defer { gateway.stop() }
        let output = try Self.curl(["-w", " %{http_code}", "-d", "0123456789", "http://127.0.0.1:\(gateway.port)/x"])
        #expect(output.hasSuffix("method=POST body=10 200"), "\(output)")
        #expect(
            Self.metric(
                gateway,
                #"attest_gateway_http2_upstream_unprocessed_streams_total{upstream="api",reason="refused_stream"}"#)
                == 1)
        #expect(Self.metric(gateway, #"attest_gateway_http2_upstream_retries_total{upstream="api"}"#) == 1)
        let events = upstream.stop()
        #expect(events.contains("refused 1 1"), "\(events)")
    }

    /// No upstream listening: the client gets the gateway's 502, as with an HTTP/1.1 upstream.
    @Test func anUnreachableUpstreamIs502() throws {
        var configuration = UpstreamConfiguration(name: "api", host: "127.0.0.1", port: 9, maxConnections: 2)
        configuration.wireProtocol = .h2c
        let gateway = try TestGateway(upstreams: ["api": configuration], loops: 1)
        defer { gateway.stop() }
        let output = try Self.curl(["-w", " %{http_code}", "http://127.0.0.1:\(gateway.port)/x"])
        #expect(output.hasSuffix(" 502"), "\(output)")
        #expect(output.contains("upstream_unavailable"), "\(output)")
    }

    static func metric(_ gateway: TestGateway, _ series: String) -> Int {
        HTTP2OperationsTests.metric(gateway, series)
    }
}
