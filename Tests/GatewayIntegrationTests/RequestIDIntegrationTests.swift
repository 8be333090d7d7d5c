import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import HTTP1

/// `X-Request-Id` and W3C trace context through a real gateway on loopback (the peer is
/// 127.0.0.1): what the upstream receives, what the client gets back, what the access log says.
@Suite(.serialized) struct RequestIDIntegrationTests {
    static let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    static func values(_ name: String, _ headers: [(String, String)]) -> [String] {
        headers.filter { $0.0.caseInsensitiveCompare(name) == .orderedSame }.map(\.1)
    }

    static func isGenerated(_ id: String?) -> Bool {
        guard let id, id.utf8.count == 32 else { return false }
        return id.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    static func logLine(_ gateway: TestGateway, containing text: String) throws -> [String: Any] {
        var found: String?
        _ = eventually {
            found = gateway.accessLogLines().first { $0.contains(text) }
            return found != nil
        }
        let line = try #require(found, "no access-log line with \(text)")
        return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    @Test func theUpstreamAndTheClientGetTheSameGeneratedID() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, accessLog: true)
        defer { gateway.stop() }
        let body = "hello"
        let response = try TestHTTPClient.request(
            port: gateway.port,
            "POST /ids HTTP/1.1\r\nHost: api.example\r\nUser-Agent: probe/1 \"quoted\"\r\nX-Request-Id: spoofed-by-client\r\n"
                + "traceparent: \(Self.traceparent)\r\ntracestate: vendor=abc\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
                + body)
        #expect(response.status == 200)
        let returned = response.headers["X-Request-Id"]
        #expect(Self.isGenerated(returned), "\(String(describing: returned))")
        #expect(response.headers.values(for: "X-Request-Id").count == 1)
        let echoed = try response.echoedHeaders()
        // An untrusted client's ID is replaced; the upstream sees exactly one, the same one.
        #expect(Self.values("X-Request-Id", echoed) == [returned ?? "?"])
        #expect(Self.values("traceparent", echoed) == [Self.traceparent])
        #expect(Self.values("tracestate", echoed) == ["vendor=abc"])

        let line = try Self.logLine(gateway, containing: returned ?? "?")
        #expect(line["request_id"] as? String == returned)
        #expect(line["trace_id"] as? String == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(line["user_agent"] as? String == "probe/1 \"quoted\"")
        #expect(line["client"] as? String == "127.0.0.1")
        #expect(line["bytes_in"] as? Int == body.utf8.count)
        #expect((line["bytes_out"] as? Int ?? 0) == response.rawByteCount, "head and body as written")
        #expect(line["upstream_addr"] as? String == "127.0.0.1:\(upstream.port)")
        #expect(line["tls"] is NSNull)
    }

    @Test func anInvalidTraceparentIsNotForwardedNorItsTracestate() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, accessLog: true)
        defer { gateway.stop() }
        let bad = "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
        let response = try TestHTTPClient.request(
            port: gateway.port, "GET /bad HTTP/1.1\r\nHost: h\r\ntraceparent: \(bad)\r\ntracestate: a=1\r\n\r\n")
        #expect(response.status == 200)
        let echoed = try response.echoedHeaders()
        #expect(Self.values("traceparent", echoed).isEmpty)
        #expect(Self.values("tracestate", echoed).isEmpty)
        let id = try #require(response.headers["X-Request-Id"])
        let line = try Self.logLine(gateway, containing: id)
        #expect(line["trace_id"] is NSNull)
        // No traceparent: the gateway does not start a trace.
        let plain = try TestHTTPClient.request(port: gateway.port, "GET /none HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(Self.values("traceparent", try plain.echoedHeaders()).isEmpty)
    }

    @Test func aTrustedPeersIDIsKeptAndAnInvalidOneReplaced() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1, accessLog: true, trustedProxies: ["127.0.0.1/32"])
        defer { gateway.stop() }
        let kept = try TestHTTPClient.request(
            port: gateway.port, "GET /t HTTP/1.1\r\nHost: h\r\nX-Request-Id: lb-7f3a-0001\r\n\r\n")
        #expect(kept.headers["X-Request-Id"] == "lb-7f3a-0001")
        #expect(Self.values("X-Request-Id", try kept.echoedHeaders()) == ["lb-7f3a-0001"])
        #expect(try Self.logLine(gateway, containing: "lb-7f3a-0001")["request_id"] as? String == "lb-7f3a-0001")

        let overlong = String(repeating: "a", count: 129)
        let replaced = try TestHTTPClient.request(
            port: gateway.port, "GET /t HTTP/1.1\r\nHost: h\r\nX-Request-Id: \(overlong)\r\n\r\n")
        #expect(Self.isGenerated(replaced.headers["X-Request-Id"]))
        #expect(Self.values("X-Request-Id", try replaced.echoedHeaders()) == [replaced.headers["X-Request-Id"] ?? "?"])
    }

    @Test func theGatewaysOwnErrorsCarryAnID() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1, accessLog: true, trustedProxies: ["127.0.0.1/32"])
        defer { gateway.stop() }
        // A head the parser refuses (two Host fields): no head, a generated ID all the same.
        let malformed = try TestHTTPClient.request(
            port: gateway.port, "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\nX-Request-Id: not-read\r\n\r\n")
        #expect(malformed.status == 400)
        let id = malformed.headers["X-Request-Id"]
        #expect(Self.isGenerated(id), "\(String(describing: id))")
        #expect(try Self.logLine(gateway, containing: id ?? "?")["status"] as? Int == 400)
        // A refusal after the head (a trusted peer's ambiguous X-Forwarded-Proto): the peer's ID.
        let refused = try TestHTTPClient.request(
            port: gateway.port,
            "GET / HTTP/1.1\r\nHost: h\r\nX-Request-Id: lb-9\r\nX-Forwarded-Proto: gopher\r\n\r\n")
        #expect(refused.status == 400)
        #expect(try refused.json()["error"] as? String == "invalid_forwarded_header")
        #expect(refused.headers["X-Request-Id"] == "lb-9")
        let line = try Self.logLine(gateway, containing: "lb-9")
        #expect(line["upstream_addr"] is NSNull)
    }
}
