import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import GatewayIO
@testable import HTTPProxy
@testable import PolicyModel

extension Process {
    /// Runs a server of scripts/h2 (its stdin and stderr already set) and reads the `PORT <n>`
    /// line it prints on stdout once it listens; terminates it and throws on any other line.
    func runAnnouncingPort(_ name: String) throws -> UInt16 {
        let output = Pipe()
        self.standardOutput = output
        try self.run()
        let text = ServerAnnouncement.firstLine(of: output.fileHandleForReading)
        guard let port = ServerAnnouncement.announcedPort(text) else {
            self.terminate()
            throw TestFailure("\(name) did not start: \(text)")
        }
        return port
    }
}

/// A real gRPC server (grpcio, `scripts/h2/grpc_upstream.py`) on h2c, started for one test.
final class GRPCUpstreamProcess: @unchecked Sendable {
    let process: Process
    let port: UInt16
    private let input: Pipe

    /// `tls`: HTTP/2 over TLS (ALPN h2) with that certificate instead of h2c.
    init(maxConcurrentStreams: Int? = nil, tls: TLSCertificateFiles? = nil) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments =
            [Repository.root.appendingPathComponent("scripts/h2/grpc_upstream.py").path]
            + (maxConcurrentStreams.map { ["--max-concurrent-streams", String($0)] } ?? [])
            + (tls.map { ["--tls", $0.certificateChainPath, $0.privateKeyPath] } ?? [])
        let input = Pipe()
        process.standardInput = input
        process.standardError = FileHandle.nullDevice
        self.port = try process.runAnnouncingPort("grpc_upstream.py")
        self.process = process
        self.input = input
    }

    func configuration(maxConnections: Int = 4) -> UpstreamConfiguration {
        var configuration = UpstreamConfiguration(
            name: "grpc", host: "127.0.0.1", port: self.port, maxConnections: maxConnections)
        configuration.wireProtocol = .h2c
        return configuration
    }

    func stop() {
        try? self.input.fileHandleForWriting.close()
        self.process.waitUntilExit()
    }
}

/// gRPC clients (grpcio) through the gateway (h2c listener) to a gRPC server as an `h2c`
/// upstream: streams, trailers, statuses and the upstream's stream limit.
@Suite(.serialized, .timeLimit(.minutes(2))) struct HTTP2UpstreamTests {
    static func call(_ port: UInt16, _ method: String, _ mode: String, body: String = "", metadata: String = "[]")
        throws -> [String: Any]
    {
        let script = Repository.root.appendingPathComponent("scripts/h2/grpc_client.py").path
        let (status, output) = try TLSTestPKI.run(
            "/usr/bin/python3", [script, "127.0.0.1:\(port)", method, mode, body, metadata])
        #expect(status == 0, "\(output)")
        return try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "\(output)")
    }

    @Test func unaryAndServerStreamingCallsReachTheGRPCUpstreamWithTheIdentityHeaders() throws {
        let upstream = try GRPCUpstreamProcess()
        defer { upstream.stop() }
        let gateway = try TestGateway(upstreams: ["grpc": upstream.configuration()], loops: 1, h2c: true)
        defer { gateway.stop() }

        let unary = try Self.call(
            gateway.port, "/test.Echo/Unary", "unary", body: "hello", metadata: #"[["x-app-attest-status", "spoofed"]]"#
        )
        #expect(unary["code"] as? String == "OK", "\(unary)")
        let echoed = try #require(
            try JSONSerialization.jsonObject(with: Data((unary["response"] as? String ?? "").utf8)) as? [String: Any])
        #expect(echoed["bytes"] as? Int == 5)
        let metadata = try #require(echoed["metadata"] as? [[String]])
        let names = metadata.map { $0[0] }
        // The identity and forwarding headers an HTTP/1.1 upstream gets, from UpstreamRequestPlan.
        #expect(names.contains("x-forwarded-for"), "\(metadata)")
        #expect(names.contains("x-request-id"), "\(metadata)")
        #expect(names.contains("forwarded"), "\(metadata)")
        // The client's copy of an identity header does not pass (the passthrough gate sets none).
        #expect(!metadata.contains(["x-app-attest-status", "spoofed"]), "\(metadata)")

        let streamed = try Self.call(gateway.port, "/test.Echo/Stream", "stream", body: "5")
        #expect(streamed["code"] as? String == "OK", "\(streamed)")
        #expect(streamed["response"] as? [String] == ["0", "1", "2", "3", "4"], "\(streamed)")
    }

    @Test func theUpstreamsStatusAndMessageReachTheClientAsTrailers() throws {
        let upstream = try GRPCUpstreamProcess()
        defer { upstream.stop() }
        let gateway = try TestGateway(upstreams: ["grpc": upstream.configuration()], loops: 1, h2c: true)
        defer { gateway.stop() }
        let failed = try Self.call(gateway.port, "/test.Echo/NotFound", "unary")
        #expect(failed["code"] as? String == "NOT_FOUND", "\(failed)")
        #expect(failed["details"] as? String == "no such thing", "\(failed)")
        // A status in the trailers of a call that sent messages, too.
        let streamed = try Self.call(gateway.port, "/test.Echo/Stream", "stream", body: "2")
        #expect(streamed["code"] as? String == "OK", "\(streamed)")
    }

    @Test func twentyConcurrentCallsSucceedAgainstAnUpstreamAllowingTwoStreams() throws {
        let upstream = try GRPCUpstreamProcess(maxConcurrentStreams: 2)
        defer { upstream.stop() }
        let gateway = try TestGateway(
            upstreams: ["grpc": upstream.configuration(maxConnections: 2)], loops: 1, h2c: true)
        defer { gateway.stop() }
        let result = try Self.call(gateway.port, "/test.Echo/Slow", "concurrent:20", body: "x")
        #expect(result["ok"] as? Int == 20, "\(result)")
    }

    @Test func anH2UpstreamOverTLSAgreesOnALPNh2AndVerifiesItsCertificate() throws {
        let pki = TLSTestPKI.shared
        let upstream = try GRPCUpstreamProcess(tls: pki.ecdsa)
        defer { upstream.stop() }
        var configuration = UpstreamConfiguration(name: "grpc", host: "localhost", port: upstream.port)
        configuration.wireProtocol = .h2
        configuration.tls = UpstreamTLSConfiguration(serverName: "localhost", caFile: pki.caCertificate)
        let gateway = try TestGateway(upstreams: ["grpc": configuration], loops: 1, h2c: true)
        defer { gateway.stop() }
        let unary = try Self.call(gateway.port, "/test.Echo/Unary", "unary", body: "over tls")
        #expect(unary["code"] as? String == "OK", "\(unary)")
        let streamed = try Self.call(gateway.port, "/test.Echo/Stream", "stream", body: "3")
        #expect(streamed["response"] as? [String] == ["0", "1", "2"], "\(streamed)")
        let metrics = gateway.metrics.render()
        #expect(
            metrics.contains(#"attest_gateway_upstream_tls_handshakes_total{upstream="grpc",resumed="false"} 1"#),
            "\(metrics)")

        // A certificate for another name: the handshake fails, the gRPC client sees UNAVAILABLE.
        let wrong = try GRPCUpstreamProcess(tls: pki.wrongHost)
        defer { wrong.stop() }
        var wrongConfiguration = configuration
        wrongConfiguration.port = wrong.port
        let second = try TestGateway(upstreams: ["grpc": wrongConfiguration], loops: 1, h2c: true)
        defer { second.stop() }
        let refused = try Self.call(second.port, "/test.Echo/Unary", "unary")
        #expect(refused["code"] as? String == "UNAVAILABLE", "\(refused)")
        #expect(refused["details"] as? String == "upstream_tls_hostname_mismatch", "\(refused)")
    }

    /// One client connection, one upstream connection: a stream whose client never opens its
    /// window holds its own upstream stream (64 KiB), not the connection's other streams.
    @Test func aStalledClientStreamDoesNotHoldTheOtherStreamsOnItsUpstreamConnection() throws {
        let upstream = try GRPCUpstreamProcess()
        defer { upstream.stop() }
        let gateway = try TestGateway(
            upstreams: ["grpc": upstream.configuration(maxConnections: 1)], loops: 1, h2c: true)
        defer { gateway.stop() }
        let script = Repository.root.appendingPathComponent("scripts/h2/slow_reader.py").path
        let (status, output) = try TLSTestPKI.run("/usr/bin/python3", [script, "127.0.0.1", String(gateway.port)])
        #expect(status == 0, "\(output)")
        let result = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        #expect(result["unary_status"] as? String == "0", "\(result)")
        #expect(result["stalled_bytes"] as? Int == 0 && result["stalled_ended"] as? Bool == false, "\(result)")
    }

    @Test func grpcTimeoutIsForwardedAndTheCallEndsAtIt() throws {
        let upstream = try GRPCUpstreamProcess()
        defer { upstream.stop() }
        let gateway = try TestGateway(upstreams: ["grpc": upstream.configuration()], loops: 1, h2c: true)
        defer { gateway.stop() }
        let directory = try TemporaryDirectory()
        // One gRPC message: not compressed, length 1, "x".
        try Data([0, 0, 0, 0, 1, UInt8(ascii: "x")]).write(to: URL(fileURLWithPath: directory.path + "/message"))
        func slowCall(timeout: String) throws -> String {
            try TLSTestPKI.run(
                "/usr/bin/curl",
                [
                    "--silent", "--max-time", "10", "--http2-prior-knowledge", "--include", "-H",
                    "content-type: application/grpc", "-H", "te: trailers", "-H", "grpc-timeout: \(timeout)",
                    "--data-binary", "@" + directory.path + "/message",
                    "http://127.0.0.1:\(gateway.port)/test.Echo/Slow",
                ]
            ).output
        }
        // The upstream answers after 0.3 s: with 100 ms the call ends with 4 DEADLINE_EXCEEDED. The
        // upstream's own deadline (grpcio's "Deadline Exceeded") shows that grpc-timeout reached
        // it; the gateway's deadline at the same instant answers `upstream_timeout` instead.
        let expired = try slowCall(timeout: "100m")
        #expect(expired.contains("grpc-status: 4"), "\(expired)")
        #expect(
            expired.contains("grpc-message: Deadline Exceeded") || expired.contains("grpc-message: upstream_timeout"),
            "\(expired)")
        // Five seconds: the upstream's answer and its trailers (grpc-status 0) arrive.
        let answered = try slowCall(timeout: "5S")
        #expect(answered.contains("grpc-status: 0"), "\(answered)")
    }

    @Test func aGRPCCallToAnHTTP11UpstreamIsRefusedWithUnimplemented() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, h2c: true)
        defer { gateway.stop() }
        let refused = try Self.call(gateway.port, "/test.Echo/Unary", "unary", body: "x")
        #expect(refused["code"] as? String == "UNIMPLEMENTED", "\(refused)")
        #expect(refused["details"] as? String == "grpc_upstream_not_http2", "\(refused)")
    }

    /// HTTP/1.1 clients reach an h2c upstream (`HTTP1ToHTTP2UpstreamExchange`), but a gRPC
    /// request over HTTP/1.1 is not sent: 502, as before HTTP/1.1 clients were bridged.
    @Test func anHTTP11ClientReachesAnH2cUpstreamButNotWithGRPC() throws {
        let upstream = try GRPCUpstreamProcess()
        defer { upstream.stop() }
        let gateway = try TestGateway(upstreams: ["grpc": upstream.configuration()], loops: 1, h2c: true)
        defer { gateway.stop() }
        func curl(_ extra: [String]) throws -> String {
            try TLSTestPKI.run(
                "/usr/bin/curl",
                ["--silent", "--max-time", "10", "--http1.1", "--write-out", "\\n%{http_code}"] + extra
                    + ["http://127.0.0.1:\(gateway.port)/test.Echo/Unary"]
            ).1
        }
        let plain = try curl([])
        print("h1 to grpc upstream: \(plain.debugDescription)")
        #expect(!plain.hasSuffix("\n502"), "\(plain)")
        let grpc = try curl(["-H", "Content-Type: application/grpc", "--data-binary", "x"])
        #expect(grpc.hasSuffix("\n502"), "\(grpc)")
    }
}
