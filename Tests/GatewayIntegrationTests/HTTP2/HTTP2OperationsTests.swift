import Foundation
import GatewayTesting
import Testing

@testable import GatewayIO
@testable import HTTPProxy
@testable import PolicyModel

/// An h2c upstream that sheds streams (`scripts/h2/goaway_upstream.py`, Python h2), started for
/// one test; its stderr lines are the events it saw.
final class SheddingUpstreamProcess: @unchecked Sendable {
    let process: Process
    let port: UInt16
    private let input: Pipe
    private let errors: Pipe

    init(mode: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [Repository.root.appendingPathComponent("scripts/h2/goaway_upstream.py").path, mode]
        let input = Pipe()
        let errors = Pipe()
        process.standardInput = input
        process.standardError = errors
        self.port = try process.runAnnouncingPort("goaway_upstream.py")
        self.process = process
        self.input = input
        self.errors = errors
    }

    func configuration(idleTimeout: Duration = .seconds(60), pingInterval: Duration? = nil) -> UpstreamConfiguration {
        var configuration = UpstreamConfiguration(name: "api", host: "127.0.0.1", port: self.port, maxConnections: 4)
        configuration.wireProtocol = .h2c
        configuration.idleTimeout = idleTimeout
        configuration.pingInterval = pingInterval
        return configuration
    }

    /// Stops the server and returns its event lines.
    func stop() -> [String] {
        try? self.input.fileHandleForWriting.close()
        self.process.waitUntilExit()
        let data = self.errors.fileHandleForReading.readDataToEndOfFile()
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }
}

/// HTTP/2 operations: the `http2:` settings a client sees and the gateway enforces (applied
/// to connections opened after a reload), and the upstream side: idle timeout, GOAWAY and
/// REFUSED_STREAM retries, and their metrics.
@Suite(.serialized, .timeLimit(.minutes(2))) struct HTTP2OperationsTests {
    struct Probe: Decodable {
        let settings: [String: Int]
        let resets: [String: Int]
        let goaway: [Int]?
        let opened: [Int]
    }

    static func probe(_ port: UInt16, streams: Int, ack: Bool = false) throws -> Probe {
        let script = Repository.root.appendingPathComponent("scripts/h2/settings_probe.py").path
        let (status, output) = try TLSTestPKI.run(
            "/usr/bin/python3", [script, "127.0.0.1", String(port), String(streams)] + (ack ? ["ack"] : []))
        #expect(status == 0, "\(output)")
        let line = try #require(output.split(separator: "\n").last)
        return try JSONDecoder().decode(Probe.self, from: Data(line.utf8))
    }

    static func metric(_ gateway: TestGateway, _ series: String) -> Int {
        for line in gateway.metrics.render().split(separator: "\n") where line.hasPrefix(series + " ") {
            return Int(line.split(separator: " ").last ?? "") ?? -1
        }
        return 0
    }

    static func curl(_ port: UInt16, _ extra: [String] = []) throws -> String {
        let (status, output) = try TLSTestPKI.run(
            "/usr/bin/curl",
            ["-sS", "--http2-prior-knowledge", "--max-time", "10", "-w", " %{http_code}"] + extra
                + ["http://127.0.0.1:\(port)/ops"])
        #expect(status == 0, "\(output)")
        return output
    }

    /// The policy's `http2:` block, decoded and installed as a reload installs it: connections
    /// opened before it announced the defaults, those after it announce the configured values,
    /// and the stream beyond `max_concurrent_streams` is refused (REFUSED_STREAM) while the
    /// others stay open.
    @Test func configuredSettingsAreAnnouncedAfterAReloadAndTheStreamLimitIsEnforced() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, h2c: true)
        defer { gateway.stop() }

        let before = try Self.probe(gateway.port, streams: 3)
        #expect(before.settings["max_concurrent_streams"] == 100, "\(before)")
        #expect(before.settings["initial_window_size"] == 65_535, "\(before)")
        #expect(before.resets.isEmpty, "\(before)")

        let policy = try PolicyLoader.parse(
            """
            store: memory
            listen: [{ address: "127.0.0.1:8081", h2c: true }]
            upstreams: { api: { url: "http://127.0.0.1:9000" } }
            routes: [{ match: { path_prefix: / }, upstream: api, mode: off }]
            http2: { max_concurrent_streams: 2, initial_window_size: 1MiB }
            """, sourcePath: "policies.yaml")
        var configuration = ServingConfiguration(policy: policy, gates: [:], accessLogKeyID: .prefix)
        configuration.upstreams = ["api": upstream.configuration]
        try gateway.server.install(configuration)

        let after = try Self.probe(gateway.port, streams: 3)
        print("h2-settings after reload: \(after)")
        #expect(after.settings["max_concurrent_streams"] == 2, "\(after)")
        #expect(after.settings["initial_window_size"] == 1 << 20, "\(after)")
        // The third stream (ID 5) is refused; the first two are not reset.
        #expect(after.resets == ["5": Int(HTTP2ErrorCode.refusedStream.rawValue)], "\(after)")
        #expect(after.goaway == nil, "\(after)")
    }

    /// Once the client acknowledged the limit, a stream beyond it is still never served:
    /// libnghttp2 answers it (REFUSED_STREAM, or GOAWAY PROTOCOL_ERROR below that stream).
    @Test func anAcknowledgedStreamLimitIsEnforced() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, h2c: true)
        defer { gateway.stop() }
        gateway.server.update { $0.http2.maxConcurrentStreams = 2 }
        let probe = try Self.probe(gateway.port, streams: 3, ack: true)
        print("h2-settings acknowledged limit: \(probe)")
        #expect(probe.settings["max_concurrent_streams"] == 2, "\(probe)")
        let refused = probe.resets["5"] == Int(HTTP2ErrorCode.refusedStream.rawValue)
        let goneAway = probe.goaway.map { $0[0] < 5 } ?? false
        #expect(refused || goneAway, "\(probe)")
        #expect(probe.resets["1"] == nil && probe.resets["3"] == nil, "\(probe)")
    }

    /// An upstream that sends GOAWAY (last stream 0) on its first connection: the stream it did
    /// not process is sent again on a new connection and answered; the metrics count it.
    @Test func aStreamAboveAnUpstreamGoAwayIsRetriedOnANewConnection() throws {
        let upstream = try SheddingUpstreamProcess(mode: "goaway_first")
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration()], loops: 1, h2c: true)
        defer { gateway.stop() }
        let answer = try Self.curl(gateway.port)
        #expect(answer.hasPrefix("conn=2 stream=1 method=GET"), "\(answer)")
        #expect(answer.hasSuffix(" 200"), "\(answer)")
        #expect(
            Self.metric(gateway, #"attest_gateway_http2_upstream_goaways_total{upstream="api",code="no_error"}"#) == 1)
        #expect(
            Self.metric(
                gateway, #"attest_gateway_http2_upstream_unprocessed_streams_total{upstream="api",reason="goaway"}"#)
                == 1)
        #expect(Self.metric(gateway, #"attest_gateway_http2_upstream_retries_total{upstream="api"}"#) == 1)
        #expect(Self.metric(gateway, #"attest_gateway_http2_upstream_streams_total{upstream="api"}"#) == 2)
        #expect(
            eventually {
                Self.metric(
                    gateway, #"attest_gateway_http2_upstream_connections_closed_total{upstream="api",reason="goaway"}"#)
                    == 1
            })
        #expect(Self.metric(gateway, #"attest_gateway_http2_upstream_connections{upstream="api"}"#) == 1)
        let events = upstream.stop()
        #expect(events.contains("goaway 1") && events.contains("answered 2 1"), "\(events)")
    }

    /// RST_STREAM REFUSED_STREAM on the first stream: it is sent again once and answered (for
    /// an HTTP/2 client only when none of its body had gone out; a GET here).
    @Test func aRefusedStreamIsRetriedOnce() throws {
        let upstream = try SheddingUpstreamProcess(mode: "refuse_first")
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration()], loops: 1, h2c: true)
        defer { gateway.stop() }
        let answer = try Self.curl(gateway.port)
        #expect(answer.contains("method=GET body=0"), "\(answer)")
        #expect(answer.hasSuffix(" 200"), "\(answer)")
        #expect(
            Self.metric(
                gateway,
                #"attest_gateway_http2_upstream_unprocessed_streams_total{upstream="api",reason="refused_stream"}"#)
                == 1)
        #expect(Self.metric(gateway, #"attest_gateway_http2_upstream_retries_total{upstream="api"}"#) == 1)
        let events = upstream.stop()
        #expect(events.contains("refused 1 1"), "\(events)")
    }

    /// `ping_interval`: an upstream that stops answering (PINGs too) with a stream open is given
    /// up after two intervals, long before the 60 s response timeout: 502 to the client.
    @Test func aHungUpstreamIsFoundByItsUnansweredPing() throws {
        let upstream = try SheddingUpstreamProcess(mode: "stall")
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration(pingInterval: .seconds(1))], loops: 1, h2c: true)
        defer { gateway.stop() }
        let started = ContinuousClock.now
        let answer = try Self.curl(gateway.port)
        #expect(answer.hasSuffix(" 502"), "\(answer)")
        #expect(answer.contains("upstream_unavailable"), "\(answer)")
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(
            Self.metric(
                gateway,
                #"attest_gateway_http2_upstream_connections_closed_total{upstream="api",reason="ping_timeout"}"#)
                == 1)
        // Not `stop()`: the stalled thread never ends.
        upstream.process.terminate()
    }

    /// `idle_timeout`: a connection without streams sends GOAWAY NO_ERROR and closes; the next
    /// request opens a new one.
    @Test func anIdleUpstreamConnectionIsClosedAfterItsIdleTimeout() throws {
        let upstream = try SheddingUpstreamProcess(mode: "plain")
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration(idleTimeout: .seconds(1))], loops: 1, h2c: true)
        defer { gateway.stop() }
        let open = #"attest_gateway_http2_upstream_connections{upstream="api"}"#
        let idleCloses =
            #"attest_gateway_http2_upstream_connections_closed_total{upstream="api",reason="idle_timeout"}"#
        #expect(try Self.curl(gateway.port).hasPrefix("conn=1 stream=1"))
        #expect(Self.metric(gateway, open) == 1)
        #expect(eventually(timeout: .seconds(5)) { Self.metric(gateway, idleCloses) == 1 })
        #expect(Self.metric(gateway, open) == 0)
        #expect(try Self.curl(gateway.port).hasPrefix("conn=2 stream=1"))
        let events = upstream.stop()
        // The upstream heard the gateway's GOAWAY (NO_ERROR) before the close.
        #expect(events.contains("peer_goaway 1 0"), "\(events)")
    }
}
