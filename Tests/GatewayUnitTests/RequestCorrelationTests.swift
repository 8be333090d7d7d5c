import Foundation
import GatewayTesting
import Testing

@testable import HTTP1
@testable import HTTPProxy

/// W3C `traceparent` parsing, request-ID generation and acceptance, and the access-log fields
/// they feed (no sockets: `ProxyIntegrationTests`/`RequestIDIntegrationTests` do those).
@Suite struct RequestCorrelationTests {
    static let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test(arguments: [
        valid,
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff",
        // A later version: parsed by its first 55 characters; more may follow after a dash.
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds",
    ])
    func validTraceparents(_ value: String) {
        #expect(TraceParent.isValid(value))
    }

    @Test(arguments: [
        ("empty", ""),
        ("version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ("uppercase version", "0A-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ("uppercase trace-id", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
        ("uppercase parent-id", "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01"),
        ("uppercase flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A"),
        ("all-zero trace-id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
        ("all-zero parent-id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"),
        ("short trace-id", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01"),
        ("long trace-id", "00-4bf92f3577b34da6a3ce929d0e0e47366-00f067aa0ba902b7-01"),
        ("short parent-id", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01"),
        ("non-hex trace-id", "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01"),
        ("non-hex flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x"),
        ("one-digit flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1"),
        ("version 00 with more", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"),
        ("later version, no dash after", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"),
        ("wrong separator", "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ("spaces", " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ("one-digit version", "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01a"),
        ("non-ASCII", "00-4bf92f3577b34da6a3ce929d0e0e47é-00f067aa0ba902b7-01"),
    ])
    func invalidTraceparents(_ why: String, _ value: String) {
        #expect(!TraceParent.isValid(value), "\(why)")
    }

    @Test func traceIDIsTheSecondPart() {
        #expect(TraceParent.traceID(of: Self.valid) == "4bf92f3577b34da6a3ce929d0e0e4736")
    }

    @Test func generatedIDsAreHexPrefixLoopAndCounter() {
        var generator = RequestIDGenerator(loopIndex: 3, prefix: 0x0123_4567_89ab_cdef)
        let first = generator.next()
        let second = generator.next()
        #expect(first.text == "0123456789abcdef0300000000000001")
        #expect(second.text == "0123456789abcdef0300000000000002")
        #expect(!first.isAccepted)
        #expect(first.utf8Count == 32)
        var other = RequestIDGenerator(loopIndex: 4, prefix: 0x0123_4567_89ab_cdef)
        #expect(other.next() != first, "loops never share an ID")
        // The process prefix is drawn at random: two generators of this process share it.
        var a = RequestIDGenerator(loopIndex: 0)
        var b = RequestIDGenerator(loopIndex: 1)
        #expect(a.next().text.prefix(16) == b.next().text.prefix(16))
    }

    @Test func acceptedIDsAreBoundedAndSafe() {
        #expect(
            RequestID(accepting: "f81d4fae-7dec-11d0-a765-00a0c91e6bf6")?.text == "f81d4fae-7dec-11d0-a765-00a0c91e6bf6"
        )
        #expect(RequestID(accepting: "Root=1-67891233-abcdef012345678912345678")?.isAccepted == true)
        #expect(RequestID(accepting: "a/b+c=d_e.f:g") != nil)
        #expect(RequestID(accepting: String(repeating: "a", count: 128)) != nil)
        for bad in [
            "", String(repeating: "a", count: 129), "has space", "quote\"", "back\\slash", "new\nline", "caf\u{E9}",
            "semi;colon", "comma,list", "<script>", "tab\t",
        ] {
            #expect(RequestID(accepting: bad) == nil, "\(bad)")
        }
    }

    static func scan(_ fields: [(String, String)], trusted: Bool) -> RequestCorrelation {
        RequestCorrelation.scan(
            HTTPHeaders(fields.map { (name: $0.0, value: $0.1) }), peerIsTrusted: trusted
        ) { RequestID(high: 1, low: 2) }
    }

    static let generated = RequestID(high: 1, low: 2)

    @Test func aRequestIDIsAcceptedOnlyFromATrustedPeer() {
        #expect(Self.scan([("X-Request-Id", "lb-42")], trusted: true).requestID.text == "lb-42")
        #expect(Self.scan([("x-request-id", "lb-42")], trusted: false).requestID == Self.generated)
        // Invalid, overlong, or two of them from a trusted peer: replaced.
        #expect(Self.scan([("X-Request-Id", "has space")], trusted: true).requestID == Self.generated)
        #expect(
            Self.scan([("X-Request-Id", String(repeating: "x", count: 200))], trusted: true).requestID
                == Self.generated)
        #expect(Self.scan([("X-Request-Id", "a"), ("X-Request-Id", "b")], trusted: true).requestID == Self.generated)
        #expect(Self.scan([], trusted: true).requestID == Self.generated)
    }

    @Test func traceparentCountsOnlyWhenValidAndAlone() {
        #expect(Self.scan([("traceparent", Self.valid)], trusted: false).traceparent == Self.valid)
        #expect(Self.scan([("Traceparent", Self.valid)], trusted: false).traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(Self.scan([("traceparent", "00-bad")], trusted: false).traceparent == nil)
        #expect(
            Self.scan([("traceparent", Self.valid), ("traceparent", Self.valid)], trusted: false).traceparent == nil)
        #expect(Self.scan([("tracestate", "a=1")], trusted: false).traceparent == nil)
    }

    @Test func userAgentIsTheFirstOne() {
        let correlation = Self.scan([("User-Agent", "app/1.0"), ("user-agent", "second")], trusted: false)
        #expect(correlation.userAgent == "app/1.0")
    }

    @Test func headerRolesOfTheNewFields() {
        #expect(HeaderRewriting.role(of: "X-Request-ID") == .requestID)
        #expect(HeaderRewriting.role(of: "TRACEPARENT") == .traceparent)
        #expect(HeaderRewriting.role(of: "tracestate") == .tracestate)
        #expect(HeaderRewriting.role(of: "User-Agent") == .userAgent)
        // Same lengths, other names: unchanged.
        #expect(HeaderRewriting.role(of: "Connection") == .hopByHop)
        #expect(HeaderRewriting.role(of: "Keep-Alive") == .hopByHop)
        #expect(HeaderRewriting.role(of: "X-Request-Ix") == .other)
        #expect(HeaderRewriting.role(of: "Content-Type") == .other)
    }

    @Test func trailersNeverCarryTheRequestIDOrTraceContext() {
        let trailers = HTTPHeaders([
            (name: "X-Request-Id", value: "t"), (name: "traceparent", value: Self.valid),
            (name: "tracestate", value: "a=1"), (name: "X-Checksum", value: "1"),
        ])
        let forwarded = HeaderRewriting.forwardedTrailers(trailers)
        #expect(forwarded?.fields.map(\.name) == ["X-Checksum"])
    }

    // MARK: - Access-log fields

    static func line(_ entry: borrowing AccessLogBuffer.Entry) throws -> (text: String, json: [String: Any]) {
        var buffer = AccessLogBuffer()
        buffer.append(entry)
        let text = String(decoding: buffer.take().bytes, as: UTF8.self)
        #expect(text.hasSuffix("}\n") && text.filter { $0 == "\n" }.count == 1)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        return (text, json)
    }

    @Test func accessLogHasTheCorrelationFields() throws {
        let (_, json) = try Self.line(
            .init(
                method: "GET", path: "/", route: "api", status: 200, verdict: "skipped", keyID: nil,
                upstreamNanoseconds: 1000, totalNanoseconds: 2000, client: "203.0.113.9",
                requestID: RequestID(high: 0xab, low: 0xcd), traceparent: Self.valid, userAgent: "app/1.0 (iOS 18)",
                bytesIn: 12, bytesOut: 345, upstreamAddress: "127.0.0.1:8080", tlsVersion: "TLSv1.3"))
        #expect(json["request_id"] as? String == "00000000000000ab00000000000000cd")
        #expect(json["trace_id"] as? String == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(json["user_agent"] as? String == "app/1.0 (iOS 18)")
        #expect(json["bytes_in"] as? Int == 12)
        #expect(json["bytes_out"] as? Int == 345)
        #expect(json["upstream_addr"] as? String == "127.0.0.1:8080")
        #expect(json["tls"] as? String == "TLSv1.3")
        #expect(json["client"] as? String == "203.0.113.9")
    }

    @Test func absentFieldsAreNull() throws {
        let (_, json) = try Self.line(
            .init(
                method: "GET", path: "/", route: "-", status: 400, verdict: "malformed", keyID: nil,
                upstreamNanoseconds: nil, totalNanoseconds: 0))
        for key in ["request_id", "trace_id", "user_agent", "upstream_addr", "tls"] {
            #expect(json[key] is NSNull, "\(key)")
        }
        #expect(json["bytes_in"] as? Int == 0)
    }

    /// Every field a client controls survives a JSON parser unchanged: quotes, backslashes,
    /// control characters, DEL, non-ASCII (copied as UTF-8), and U+2028.
    @Test func everyClientFieldIsEscaped() throws {
        let nasty = "a\"b\\c\u{01}\u{1F}\u{7F}\n\r\t caf\u{E9} \u{1F600} \u{2028}}"
        let (text, json) = try Self.line(
            .init(
                method: nasty, path: nasty[...], route: "r", status: 200, verdict: "v", keyID: nasty,
                upstreamNanoseconds: nil, totalNanoseconds: 0, arm: nasty, client: nasty,
                requestID: RequestID(accepting: "id-1"), userAgent: nasty, upstreamAddress: "[::1]:80",
                tlsVersion: nasty))
        for key in ["method", "path", "key_id", "arm", "client", "user_agent", "tls"] {
            #expect(json[key] as? String == nasty, "\(key)")
        }
        #expect(json["request_id"] as? String == "id-1")
        #expect(!text.dropLast().contains("\n"), "one line")
        #expect(!text.utf8.contains { $0 < 0x20 && $0 != 0x0A }, "no raw control byte")
    }

    @Test func userAgentIsBoundedAtAScalar() throws {
        // 255 ASCII bytes then a 2-byte scalar: cut before it, not in its middle.
        let agent = String(repeating: "u", count: 255) + "\u{E9}" + String(repeating: "v", count: 100)
        let (_, json) = try Self.line(
            .init(
                method: "GET", path: "/", route: "r", status: 200, verdict: "v", keyID: nil,
                upstreamNanoseconds: nil, totalNanoseconds: 0, userAgent: agent))
        #expect(json["user_agent"] as? String == String(repeating: "u", count: 255))
        #expect(AccessLogBuffer.bounded("short", to: 256) == "short")
        #expect(AccessLogBuffer.bounded(String(repeating: "x", count: 300), to: 256).utf8.count == 256)
    }
}
