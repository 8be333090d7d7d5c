import GatewayTesting
import Testing

@testable import HTTP1
@testable import HTTPProxy
@testable import PolicyModel

/// `UpstreamRequestPlan.writeHead` (the proxy's path) must write exactly what
/// `UpstreamRequestPlan.make` + `HTTPSerializer.writeRequestHead` write.
@Suite struct UpstreamRequestHeadTests {
    static func head(_ method: String, _ target: String, minor: Int = 1, _ fields: [(String, String)])
        -> HTTPRequestHead
    {
        HTTPRequestHead(
            method: method, target: target, versionMinor: minor,
            headers: HTTPHeaders(fields.map { (name: $0.0, value: $0.1) }))
    }

    static let heads: [HTTPRequestHead] = [
        // What wrk sends, after the off-mode gate.
        head("GET", "/", [("Host", "127.0.0.1:18085"), ("X-App-Attest-Status", "skipped")]),
        head(
            "GET", "/v1/x?q=1",
            [
                ("Host", "api.example.com"), ("X-Forwarded-For", "203.0.113.7"),
                ("x-forwarded-for", "10.0.0.1, 10.0.0.2"),
                ("Forwarded", "for=203.0.113.7;proto=https"), ("X-Forwarded-Proto", "https"),
                ("X-Forwarded-Host", "evil.example"), ("Accept", "*/*"),
            ]),
        head(
            "POST", "/upload",
            [
                ("Host", "h"), ("Connection", "keep-alive, X-Secret, x-app-attest-status"), ("X-Secret", "s"),
                ("X-App-Attest-Status", "verified"), ("Expect", "100-continue"), ("TE", "trailers"),
                ("Keep-Alive", "timeout=5"), ("Upgrade", "websocket"), ("Proxy-Connection", "x"),
                ("Proxy-Authorization", "Basic x"), ("Content-Length", "5"), ("Transfer-Encoding", "chunked"),
            ]),
        head("GET", "/old", minor: 0, [("User-Agent", "curl")]),
        head("PUT", "/p", [("Host", "quote\"and\\back slash"), ("X-Gate", "line\r\nbreak\u{0}nul")]),
        head("DELETE", "/d", [("Host", "[::1]:8080"), ("Connection", "close")]),
        // Issue 9: `Connection: Host` must not leave the upstream request without Host.
        head("GET", "/h", [("Host", "api.example"), ("Connection", "Host, host, keep-alive")]),
        head("PATCH", "/p", [("Host", ""), ("X-Empty", "")]),
        head("OPTIONS", "*", [("Host", "h"), ("Host", "second")]),
        // Request ID and trace context: a valid traceparent with tracestate, a client's request ID.
        head(
            "GET", "/trace",
            [
                ("Host", "h"), ("traceparent", Self.validTraceparent), ("X-Request-Id", "client-chosen"),
                ("tracestate", "a=1"), ("TraceState", "b=2"),
            ]),
        head(
            "GET", "/bad-trace",
            [
                ("Host", "h"), ("traceparent", "00-" + String(repeating: "0", count: 32) + "-00f067aa0ba902b7-01"),
                ("tracestate", "a=1"), ("x-request-id", "one"), ("X-REQUEST-ID", "two"),
            ]),
        head(
            "GET", "/many",
            [("Host", "h")] + (0..<30).map { ("X-Field-\($0)", String(repeating: "v", count: $0 * 11)) }),
    ]

    static let validTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    /// The correlation the connection would compute for `head`, with a fixed generated ID.
    static func correlation(_ head: HTTPRequestHead, trusted: Bool) -> RequestCorrelation {
        RequestCorrelation.scan(head.headers, peerIsTrusted: trusted) {
            RequestID(high: 0x0123_4567_89ab_cdef, low: 0x0100_0000_0000_002a)
        }
    }

    static let framings: [(RequestBodyFraming, Int?)] = [
        (.none, nil), (.contentLength(0), nil), (.contentLength(12345), nil), (.chunked, nil), (.none, 0),
        (.contentLength(5), 5), (.chunked, 17), (.none, 3),
    ]

    @Test(arguments: Self.heads.indices)
    func writeHeadMatchesThePlan(index: Int) {
        let gateHead = Self.heads[index]
        for address in ["127.0.0.1", "2001:db8::1", "10.1.2.3"] {
            // A trusted peer (its forwarding fields kept) only for the last address.
            let trusted = address == "10.1.2.3"
            for (framing, buffered) in Self.framings {
                let correlation = Self.correlation(gateHead, trusted: trusted)
                let plan = UpstreamRequestPlan.make(
                    gateHead: gateHead, framing: framing, bufferedBodyCount: buffered, clientAddress: address,
                    upstreamHost: "127.0.0.1:18080", peerIsTrusted: trusted, requestID: correlation.requestID.text,
                    traceparentIsValid: correlation.traceparent != nil)
                var expected: [UInt8] = []
                HTTPSerializer.writeRequestHead(plan.head, into: &expected)

                var client = UpstreamRequestPlan.Client(address: address)
                client.peerIsTrusted = trusted
                let bound = UpstreamRequestPlan.headBound(
                    gateHead: gateHead, client: &client, upstreamHost: "127.0.0.1:18080",
                    requestID: correlation.requestID)
                let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: bound, alignment: 1)
                defer { memory.deallocate() }
                var writer = HeadWriter(memory)
                let encoding = UpstreamRequestPlan.writeHead(
                    gateHead: gateHead, framing: framing, bufferedBodyCount: buffered, client: &client,
                    upstreamHost: "127.0.0.1:18080", correlation: correlation, into: &writer)
                let written = Array(UnsafeRawBufferPointer(rebasing: memory[0..<writer.count]))
                let got = String(decoding: written, as: UTF8.self)
                let want = String(decoding: expected, as: UTF8.self)
                #expect(
                    written == expected,
                    "head \(index) \(address) \(framing) \(String(describing: buffered)):\n\(got)\nwant:\n\(want)")
                #expect(encoding == plan.encoding)
            }
        }
    }

    /// Random heads from a vocabulary of the fields the rewrite treats specially: same bytes,
    /// and the writer's size bound holds (a miss would stop the test process).
    @Test func randomHeadsMatchThePlan() {
        let names = [
            "Host", "host", "X-Forwarded-For", "x-forwarded-for", "Forwarded", "X-Forwarded-Proto", "X-Forwarded-Host",
            "Connection", "Keep-Alive", "TE", "Expect", "Content-Length", "Transfer-Encoding", "X-App-Attest-Status",
            "X-App-Assertion", "X-A", "x-a", "Upgrade", "Proxy-Connection", "Accept", "Cookie",
            "X-Client-Cert-Subject", "x-verified-subject", "x-forwarded-proto", "X-Request-Id", "x-request-id",
            "traceparent", "Traceparent", "tracestate", "User-Agent", "X-Real-IP", "x-real-ip", "X-SSL-Client-S-DN",
            "X-Forwarded-Client-Cert", "Client-Cert", "X-Company-User", "x-auth-token",
        ]
        let values = [
            "", "x", "a, b", "x-a, close", "keep-alive", "X-A", "x-app-attest-status, te", "\"q\\\"", "caf\u{E9}",
            "line\r\nbreak", "[::1]:80", "h:1", "203.0.113.9", String(repeating: "long,", count: 120), "\u{0}",
            " https ", "http", "\t", "CN=spoofed", Self.validTraceparent, "req-1", "00-abc",
        ]
        let subjectHeaders = ClientSubjectHeaders(["X-Client-Cert-Subject", "X-Verified-Subject"])
        let trustHeaders = ClientTrustHeaders(adding: ["X-Company-User", "X-Auth-*"])
        let methods = ["GET", "POST", "PUT", "PATCH", "HEAD", "DELETE"]
        let framings: [RequestBodyFraming] = [.none, .contentLength(0), .contentLength(42), .chunked]
        let addresses = ["127.0.0.1", "::1", "fe80::1%eth0", "10.0.0.255"]
        var random = SplitMix64(state: 2026)
        for iteration in 0..<400 {
            let count = Int.random(in: 0...12, using: &random)
            let fields = (0..<count).map { _ in
                (names.randomElement(using: &random)!, values.randomElement(using: &random)!)
            }
            let gateHead = Self.head(
                methods.randomElement(using: &random)!, "/p?\(iteration)", minor: Int.random(in: 0...1, using: &random),
                fields)
            let framing = framings.randomElement(using: &random)!
            let buffered: Int? = Bool.random(using: &random) ? nil : Int.random(in: 0...3, using: &random)
            let address = addresses.randomElement(using: &random)!
            let trusted = Bool.random(using: &random)
            let tls = Bool.random(using: &random)
            let subject: String? = Bool.random(using: &random) ? "CN=app \\x0D,O=Example" : nil
            let originAddress: String? = Bool.random(using: &random) ? "2001:db8:ffff::42" : nil
            let correlation = Self.correlation(gateHead, trusted: trusted)
            let plan = UpstreamRequestPlan.make(
                gateHead: gateHead, framing: framing, bufferedBodyCount: buffered, clientAddress: address,
                upstreamHost: "up:8080", tlsEndedHere: tls, peerIsTrusted: trusted, originAddress: originAddress,
                trustHeaders: trustHeaders, subjectHeaders: subjectHeaders,
                subjectHeader: "X-Verified-Subject", subject: subject, requestID: correlation.requestID.text,
                traceparentIsValid: correlation.traceparent != nil)
            var expected: [UInt8] = []
            HTTPSerializer.writeRequestHead(plan.head, into: &expected)
            var client = UpstreamRequestPlan.Client(address: address, tlsEndedHere: tls)
            client.peerIsTrusted = trusted
            client.originAddress = originAddress
            client.trustHeaders = trustHeaders
            client.reservedSubjectHeaders = subjectHeaders
            client.subjectHeader = "X-Verified-Subject"
            client.subject = subject
            let bound = UpstreamRequestPlan.headBound(
                gateHead: gateHead, client: &client, upstreamHost: "up:8080", requestID: correlation.requestID)
            let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: bound, alignment: 1)
            defer { memory.deallocate() }
            var writer = HeadWriter(memory)
            let encoding = UpstreamRequestPlan.writeHead(
                gateHead: gateHead, framing: framing, bufferedBodyCount: buffered, client: &client,
                upstreamHost: "up:8080", correlation: correlation, into: &writer)
            let written = Array(UnsafeRawBufferPointer(rebasing: memory[0..<writer.count]))
            #expect(written == expected, "iteration \(iteration) trusted \(trusted): \(fields)")
            #expect(encoding == plan.encoding)
        }
    }

    @Test func connectionCannotRemoveHost() {
        let gateHead = Self.head("GET", "/h", [("Host", "api.example"), ("Connection", "Host")])
        var client = UpstreamRequestPlan.Client(address: "127.0.0.1")
        let correlation = Self.correlation(gateHead, trusted: false)
        let bound = UpstreamRequestPlan.headBound(
            gateHead: gateHead, client: &client, upstreamHost: "127.0.0.1:1", requestID: correlation.requestID)
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: bound, alignment: 1)
        defer { memory.deallocate() }
        var writer = HeadWriter(memory)
        _ = UpstreamRequestPlan.writeHead(
            gateHead: gateHead, framing: .none, bufferedBodyCount: nil, client: &client, upstreamHost: "127.0.0.1:1",
            correlation: correlation, into: &writer)
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: memory[0..<writer.count]), as: UTF8.self)
        #expect(text.contains("\r\nHost: api.example\r\n"), "\(text)")
        #expect(!text.contains("Host: 127.0.0.1:1"), "the client's Host is kept, not replaced")
        let rewritten = HeaderRewriting.upstreamRequest(gateHead, clientAddress: "127.0.0.1", scheme: "http")
        #expect(rewritten.headers["Host"] == "api.example")
    }
}
