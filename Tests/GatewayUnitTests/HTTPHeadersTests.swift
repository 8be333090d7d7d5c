import GatewayTesting
import Testing

@testable import GatewayIO
@testable import HTTP1

@Suite struct HTTPHeadersTests {
    @Test func lookupIsCaseInsensitiveAndKeepsDuplicates() {
        var headers = HTTPHeaders([("Content-Type", "a"), ("X-A", "1"), ("x-a", "2")])
        #expect(headers["content-type"] == "a")
        #expect(headers.values(for: "X-A") == ["1", "2"])
        headers.remove(name: "X-a")
        #expect(!headers.contains("x-A"))
        #expect(headers.count == 1)
    }

    @Test func pathDropsQuery() {
        #expect(HTTPRequestHead(method: "GET", target: "/a/b?c=d").path == "/a/b")
        #expect(HTTPRequestHead(method: "GET", target: "/a").path == "/a")
        #expect(HTTPRequestHead(method: "GET", target: "/?").path == "/")
        #expect(HTTPRequestHead(method: "GET", target: "/a?b?c").path == "/a")
        #expect(HTTPRequestHead(method: "GET", target: "/caf\u{E9}/x?q=\u{E9}").path == "/caf\u{E9}/x")
        #expect(HTTPRequestHead(method: "GET", target: "").path == "")
    }

    @Test func jsonQuoteEscapesControlCharacters() {
        #expect(JSONText.quote("a\"b\\\n\u{01}") == "\"a\\\"b\\\\\\n\\u0001\"")
    }
}
