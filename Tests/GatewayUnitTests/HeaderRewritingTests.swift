import GatewayTesting
import Testing

@testable import GateContract
@testable import HTTP1
@testable import HTTPProxy

@Suite struct HeaderRewritingTests {
    static func names(_ headers: HTTPHeaders) -> [String] { headers.map(\.name) }

    @Test func upstreamRequestDropsHopByHopAndConnectionNamedFields() {
        let head = HTTPRequestHead(
            method: "POST",
            target: "/x",
            versionMinor: 0,
            headers: HTTPHeaders([
                ("Host", "api.example.com"),
                ("Connection", "keep-alive, X-Secret-Hop"),
                ("connection", " Foo "),
                ("Keep-Alive", "timeout=5"),
                ("TE", "trailers"),
                ("Trailer", "X-Sum"),
                ("Upgrade", "websocket"),
                ("Proxy-Connection", "keep-alive"),
                ("Proxy-Authorization", "Basic abc"),
                ("Proxy-Authenticate", "Basic"),
                ("Transfer-Encoding", "chunked"),
                ("Content-Length", "3"),
                ("Expect", "100-continue"),
                ("x-secret-hop", "1"),
                ("Foo", "2"),
                ("Authorization", "Bearer t"),
                ("X-Forwarded-Proto", "spoofed"),
                ("X-Forwarded-Host", "spoofed"),
            ])
        )
        let rewritten = HeaderRewriting.upstreamRequest(head, clientAddress: "192.0.2.7", scheme: "https")
        #expect(rewritten.versionMinor == 1)
        #expect(rewritten.method == "POST" && rewritten.target == "/x")
        #expect(
            Self.names(rewritten.headers)
                == [
                    "Host", "Authorization", "X-Forwarded-For", "X-Real-IP", "X-Forwarded-Proto", "X-Forwarded-Host",
                    "Forwarded",
                ]
        )
        #expect(rewritten.headers["x-forwarded-for"] == "192.0.2.7")
        #expect(rewritten.headers["x-forwarded-proto"] == "https")
        #expect(rewritten.headers["x-forwarded-host"] == "api.example.com")
        #expect(rewritten.headers["forwarded"] == "for=192.0.2.7;proto=https;host=api.example.com")
    }

    @Test func forwardingHeadersFromATrustedPeerAreAppendedTo() {
        let head = HTTPRequestHead(
            method: "GET",
            target: "/",
            headers: HTTPHeaders([
                ("Host", "h:8080"),
                ("X-Forwarded-For", "203.0.113.1"),
                ("x-forwarded-for", "198.51.100.2, 198.51.100.3"),
                ("Forwarded", "for=203.0.113.1"),
            ])
        )
        let rewritten = HeaderRewriting.upstreamRequest(
            head, clientAddress: "2001:db8::1", scheme: "http", peerIsTrusted: true)
        #expect(
            rewritten.headers.values(for: "X-Forwarded-For") == ["203.0.113.1, 198.51.100.2, 198.51.100.3, 2001:db8::1"]
        )
        #expect(
            rewritten.headers.values(for: "Forwarded")
                == ["for=203.0.113.1, for=\"[2001:db8::1]\";proto=http;host=\"h:8080\""]
        )
        // From any other peer the same fields are replaced: the client cannot plant a hop.
        let untrusted = HeaderRewriting.upstreamRequest(head, clientAddress: "2001:db8::1", scheme: "http")
        #expect(untrusted.headers.values(for: "X-Forwarded-For") == ["2001:db8::1"])
        #expect(untrusted.headers.values(for: "Forwarded") == ["for=\"[2001:db8::1]\";proto=http;host=\"h:8080\""])
    }

    @Test func noHostMeansNoForwardedHost() {
        let head = HTTPRequestHead(
            method: "GET",
            target: "/",
            versionMinor: 0,
            headers: HTTPHeaders([("X-Forwarded-Host", "evil")])
        )
        let rewritten = HeaderRewriting.upstreamRequest(head, clientAddress: "10.0.0.1", scheme: "http")
        #expect(!rewritten.headers.contains("x-forwarded-host"))
        #expect(rewritten.headers["forwarded"] == "for=10.0.0.1;proto=http")
        // Host for an HTTP/1.0 request without one: the upstream's when given, else the caller's job.
        #expect(!rewritten.headers.contains("host"))
        let named = HeaderRewriting.upstreamRequest(
            head,
            clientAddress: "10.0.0.1",
            scheme: "http",
            upstreamHost: "backend:9000"
        )
        #expect(named.headers.values(for: "host") == ["backend:9000"])
    }

    @Test func clientResponseDropsHopByHopAndFraming() {
        let head = HTTPResponseHead(
            status: 200,
            reason: "OK",
            versionMinor: 0,
            headers: HTTPHeaders([
                ("Content-Type", "text/plain"),
                ("Connection", "close, X-Internal"),
                ("X-Internal", "1"),
                ("Keep-Alive", "timeout=5"),
                ("Transfer-Encoding", "chunked"),
                ("Content-Length", "12"),
                ("Proxy-Authenticate", "Basic"),
                ("Upgrade", "h2c"),
                ("Set-Cookie", "a=b"),
            ])
        )
        let rewritten = HeaderRewriting.clientResponse(head)
        #expect(rewritten.versionMinor == 1)
        #expect(rewritten.status == 200 && rewritten.reason == "OK")
        #expect(Self.names(rewritten.headers) == ["Content-Type", "Set-Cookie"])
    }

    @Test func trailersLoseFramingAndRoutingFields() {
        let trailers = HTTPHeaders([
            ("X-Checksum", "abc"), ("Content-Length", "5"), ("Host", "x"), ("Transfer-Encoding", "chunked"),
        ])
        #expect(HeaderRewriting.forwardedTrailers(trailers).map(Self.names) == ["X-Checksum"])
        #expect(HeaderRewriting.forwardedTrailers(HTTPHeaders([("Host", "x")])) == nil)
        #expect(HeaderRewriting.forwardedTrailers(nil) == nil)
    }

    @Test func connectionCannotNameAwayTheGatewaysIdentityHeaders() {
        // What the gate hands over: the client's Connection header naming the identity headers
        // the gate added after stripping the client's own.
        let gated = IdentityHeaders.forwarded(
            HTTPRequestHead(
                method: "GET", target: "/x", versionMinor: 1,
                headers: HTTPHeaders([
                    ("Host", "h"), ("Connection", "X-App-Attest-Status, x-app-attest-key-id, X-Hop"),
                    ("X-App-Attest-Status", "spoofed"), ("X-Hop", "1"),
                ])),
            status: .verified,
            identity: .init(keyID: "a2V5", appID: "ABCDE12345.com.example.app", environment: "production", counter: 7))
        let rewritten = HeaderRewriting.upstreamRequest(gated, clientAddress: "192.0.2.7", scheme: "http")
        #expect(
            rewritten.headers.filter { $0.name.hasPrefix("X-App-Attest-") }.map { "\($0.name): \($0.value)" } == [
                "X-App-Attest-Status: verified", "X-App-Attest-Key-Id: a2V5",
                "X-App-Attest-App-Id: ABCDE12345.com.example.app", "X-App-Attest-Environment: production",
                "X-App-Attest-Counter: 7",
            ])
        #expect(rewritten.headers["X-Hop"] == nil)
        #expect(rewritten.headers["Connection"] == nil)
    }

    @Test func trailersCannotCarryIdentityHeaders() {
        let trailers = HTTPHeaders([
            ("X-App-Attest-Status", "verified"), ("x-app-attest-key-id", "dmljdGlt"), ("X-APP-ATTEST-COUNTER", "9"),
            ("X-App-Assertion", "AAAA"), ("X-Checksum", "abc"), ("X-App-Version", "2.1"),
        ])
        #expect(HeaderRewriting.forwardedTrailers(trailers).map(Self.names) == ["X-Checksum", "X-App-Version"])
        #expect(HeaderRewriting.forwardedTrailers(HTTPHeaders([("X-App-Attest-Status", "verified")])) == nil)
    }

    @Test func caseInsensitiveComparisons() {
        #expect("Content-Length".caseInsensitiveEquals("content-LENGTH"))
        #expect(!"Content-Length".caseInsensitiveEquals("Content-Lengt"))
        #expect(!"a".caseInsensitiveEquals("b"))
        #expect("Transfer-Encoding".equalsLowercaseASCII("transfer-encoding"))
        #expect(!"Transfer-Encodinh".equalsLowercaseASCII("transfer-encoding"))
        // Only ASCII letters fold: "K" (Kelvin sign) is not "k".
        #expect(!"\u{212A}eep".caseInsensitiveEquals("keep"))
        let headers = HTTPHeaders([("X-Long-Header-Name-Over-Fifteen", "1")])
        #expect(headers["x-long-header-name-over-fifteen"] == "1")
    }

    @Test func forwardedValuesQuoteWhatIsNotAToken() {
        #expect(HeaderRewriting.forwardedValue("example.com") == "example.com")
        #expect(HeaderRewriting.forwardedValue("a\"b") == "\"a\\\"b\"")
        #expect(HeaderRewriting.forwardedNode("[::1]") == "\"[::1]\"")
        #expect(HeaderRewriting.forwardedNode("::1") == "\"[::1]\"")
    }

    /// The word-at-a-time name comparison agrees with the byte-wise one for token bytes: random
    /// names over every token character, lengths and near misses of the literals it is used with.
    @Test func tokenNameComparisonAgreesWithTheBytewiseOne() {
        let tokenBytes = (0...127).map(UInt8.init).filter { HTTPByte.isToken($0) }
        let literals: [StaticString] = [
            "host", "expect", "connection", "content-length", "transfer-encoding", "te", "upgrade", "trailer",
            "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
        ]
        var random = SplitMix64(state: 9)
        var matches = 0
        for literal in literals {
            let text = Array(String(describing: literal).utf8)
            for trial in 0..<3000 {
                var name: [UInt8]
                switch trial % 3 {
                case 0:  // the literal in random case
                    name = text.map { Bool.random(using: &random) ? HTTPByte.upper($0) : $0 }
                case 1:  // one byte changed to any token byte
                    name = text
                    name[Int.random(in: 0..<name.count, using: &random)] = tokenBytes.randomElement(using: &random)!
                default:  // random token bytes of the same length
                    name = (0..<text.count).map { _ in tokenBytes.randomElement(using: &random)! }
                }
                // Placed at an odd offset, with token bytes around it.
                let buffer: [UInt8] = [0x61] + name + [0x62]
                buffer.withUnsafeBytes { raw in
                    let range = 1..<(1 + name.count)
                    let fast = raw.equalsLowercaseToken(range, literal)
                    #expect(fast == raw.equalsLowercase(range, literal), "\(String(decoding: name, as: UTF8.self))")
                    if fast { matches += 1 }
                }
            }
        }
        #expect(matches > 1000)

        // Field values (HTAB, SP, VCHAR, obs-text) against the Connection options it reads.
        let valueBytes = [UInt8(0x09)] + (0x20...0x7E).map(UInt8.init) + (0x80...0xFF).map(UInt8.init)
        for literal: StaticString in ["close", "keep-alive"] {
            let text = Array(String(describing: literal).utf8)
            for trial in 0..<3000 {
                var value = text.map { Bool.random(using: &random) ? HTTPByte.upper($0) : $0 }
                if trial % 2 == 1 {
                    value[Int.random(in: 0..<value.count, using: &random)] = valueBytes.randomElement(using: &random)!
                }
                value.withUnsafeBytes { raw in
                    let range = 0..<value.count
                    #expect(raw.equalsLowercaseToken(range, literal) == raw.equalsLowercase(range, literal))
                }
            }
        }
    }
}
