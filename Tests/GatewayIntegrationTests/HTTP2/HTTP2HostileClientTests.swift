import Foundation
import GatewayTesting
import Testing

@testable import HTTPProxy
@testable import PolicyModel

/// The HTTP/2 attack subset, played by `scripts/h2/hostile.py` (Python `h2`, Debian's
/// python3-h2 under /usr/bin/python3) against an h2c listener: every malformed request is
/// refused (by libnghttp2's reset or the gateway's 400 with its code) and never reaches the
/// upstream; every flood ends the connection with GOAWAY; and the gateway serves a new client
/// afterwards each time.
@Suite(.serialized) struct HTTP2HostileClientTests {
    static let script = Repository.root.appendingPathComponent("scripts/h2/hostile.py").path

    struct Outcome: Decodable {
        let outcome: String
        let detail: String
        let after: String
    }

    static func play(_ name: String, port: UInt16) throws -> Outcome {
        let (status, output) = try TLSTestPKI.run("/usr/bin/python3", [Self.script, "127.0.0.1", String(port), name])
        #expect(status == 0, "\(output)")
        let line = try #require(output.split(separator: "\n").last)
        return try JSONDecoder().decode(Outcome.self, from: Data(line.utf8))
    }

    /// Malformed requests: a reset (PROTOCOL_ERROR, from nghttp2's checks) or the gateway's 400.
    @Test(arguments: [
        "invalid_pseudo", "response_pseudo", "pseudo_after_field", "uppercase_name", "crlf_value", "connection_header",
        "te_gzip", "content_length_mismatch",
    ])
    func malformedRequestsAreRefused(_ name: String) throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, h2c: true)
        defer { gateway.stop() }
        let outcome = try Self.play(name, port: gateway.port)
        print("h2-hostile \(name) \(outcome.outcome) after \(outcome.after)")
        #expect(["reset:1", "status:400"].contains(outcome.outcome), "\(name): \(outcome)")
        #expect(outcome.after == "status:200", "\(name): \(outcome)")
        // Nothing reached the upstream but the follow-up GET.
        #expect(try upstream.stats().requests == 1, "\(name)")
    }

    @Test func authorityAndHostThatDisagreeAreRefusedWithTheGatewaysCode() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, h2c: true)
        defer { gateway.stop() }
        let outcome = try Self.play("authority_host_mismatch", port: gateway.port)
        #expect(outcome.outcome == "status:400", "\(outcome)")
        #expect(outcome.after == "status:200")
        #expect(try upstream.stats().requests == 1)
    }

    /// A stream the client cancels while the upstream thinks is logged once, as 499 (it was
    /// logged with status 0), and the connection serves the next stream.
    @Test func aCancelledStreamIsLoggedOnceAs499() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, accessLog: true, h2c: true)
        defer { gateway.stop() }
        let outcome = try Self.play("cancel_slow", port: gateway.port)
        #expect(outcome.outcome == "cancelled, then status:200", "\(outcome)")
        func cancelled() -> [[String: Any]] {
            gateway.accessLogLines().compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }.filter { $0["path"] as? String == "/cancelled" }
        }
        #expect(eventually { !cancelled().isEmpty })
        let lines = cancelled()
        #expect(lines.count == 1)
        #expect(lines.first?["status"] as? Int == RequestExchange.clientClosedStatus)
        #expect(lines.first?["protocol"] as? String == "h2")
    }

    /// A stream whose client reads nothing holds only its own window: another stream on the same
    /// connection is answered, and the slow one received no more than its 64 KiB window.
    @Test func aStalledStreamDoesNotHoldTheOthers() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, h2c: true)
        defer { gateway.stop() }
        let outcome = try Self.play("slow_reader", port: gateway.port)
        #expect(outcome.outcome == "fast_done slow_bytes<=window:True", "\(outcome)")
        #expect(outcome.after == "status:200", "\(outcome)")
    }

    /// An HPACK bomb: a 4,000-byte field put in the dynamic table once and named by its
    /// one-byte index 10,000 times (a 14 KB block that decodes to 40 MB). The header-list bound
    /// (`SETTINGS_MAX_HEADER_LIST_SIZE`, the HTTP/1.1 header limit) refuses it with 431, nothing
    /// reaches the upstream, and the same connection's HPACK state still serves a GET.
    @Test func anHPACKBombIsRefusedByTheHeaderListBoundAndTheConnectionServesOn() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, h2c: true)
        defer { gateway.stop() }
        let outcome = try Self.play("hpack_bomb", port: gateway.port)
        print("h2-hostile hpack_bomb \(outcome.outcome) after \(outcome.after)")
        #expect(outcome.outcome == "status:431;after_bomb=status:200", "\(outcome)")
        #expect(outcome.after == "status:200", "\(outcome)")
        // The GET after the bomb on its connection, and the next client's: never the bomb.
        #expect(try upstream.stats().requests == 2)
    }

    /// A client that used the last stream ID (2^31-1) is served on it; a HEADERS that reuses it
    /// ends the connection with GOAWAY STREAM_CLOSED, and the next client is served.
    @Test func theLastClientStreamIDIsServedAndItsReuseEndsTheConnection() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, h2c: true)
        defer { gateway.stop() }
        let outcome = try Self.play("stream_id_exhaustion", port: gateway.port)
        print("h2-hostile stream_id_exhaustion \(outcome.outcome) after \(outcome.after)")
        #expect(outcome.outcome == "last:status:200;then:goaway:5", "\(outcome)")
        #expect(outcome.after == "status:200", "\(outcome)")
        #expect(try upstream.stats().requests == 2)
        #expect(eventually { gateway.server.openConnections == 0 }, "the exhausted connection must be gone")
    }

    /// After the last stream ID, a HEADERS on a lower one (a stream implicitly closed) is never
    /// served. libnghttp2 ignores it as a frame on a closed stream (RFC 9113 5.1 allows that;
    /// 5.1.1 asks for a connection error): either is accepted here, an answer is not.
    @Test func aStreamIDBelowTheLastIsNeverServed() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, h2c: true)
        defer { gateway.stop() }
        let outcome = try Self.play("stream_id_lower", port: gateway.port)
        print("h2-hostile stream_id_lower \(outcome.outcome) after \(outcome.after)")
        #expect(
            ["last:status:200;then:timeout", "last:status:200;then:goaway:1", "last:status:200;then:goaway:5"]
                .contains(outcome.outcome), "\(outcome)")
        #expect(outcome.after == "status:200", "\(outcome)")
        #expect(try upstream.stats().requests == 2)
    }

    /// Floods end the connection with GOAWAY ENHANCE_YOUR_CALM (the gateway's counters, or
    /// libnghttp2's own limits); the next client is served.
    @Test(arguments: ["rapid_reset", "continuation_flood", "ping_flood", "settings_flood"])
    func floodsEndTheConnection(_ name: String) throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, h2c: true)
        defer { gateway.stop() }
        let outcome = try Self.play(name, port: gateway.port)
        print("h2-hostile \(name) \(outcome.outcome) after \(outcome.after)")
        // The GOAWAY reaches the client: the connection lingers (reads and drops) before it closes.
        #expect(outcome.outcome == "goaway:11", "\(name): \(outcome)")
        #expect(outcome.after == "status:200", "\(name): \(outcome)")
        #expect(eventually { gateway.server.openConnections == 0 }, "\(name): the flooding connection must be gone")
    }
}
