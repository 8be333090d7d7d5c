import GatewayTesting
import Testing

@testable import HTTP1

@Suite struct HTTPSerializerTests {
    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test func requestHeadIsOriginFormHTTP11() {
        var out: [UInt8] = []
        let head = HTTPRequestHead(
            method: "POST",
            target: "/v1/x?y=1",
            versionMinor: 0,
            headers: HTTPHeaders([("Host", "api"), ("X-A", "1")])
        )
        HTTPSerializer.writeRequestHead(head, into: &out)
        #expect(Self.text(out) == "POST /v1/x?y=1 HTTP/1.1\r\nHost: api\r\nX-A: 1\r\n\r\n")
    }

    @Test func responseHeadUsesTheStandardReasonWhenEmpty() {
        var out: [UInt8] = []
        HTTPSerializer.writeResponseHead(HTTPResponseHead(status: 404, headers: HTTPHeaders([("A", "b")])), into: &out)
        HTTPSerializer.writeResponseHead(HTTPResponseHead(status: 299, reason: "Custom"), into: &out)
        #expect(Self.text(out) == "HTTP/1.1 404 Not Found\r\nA: b\r\n\r\nHTTP/1.1 299 Custom\r\n\r\n")
    }

    @Test func chunksAreHexFramedAndEmptyChunksAreSkipped() {
        var out: [UInt8] = []
        let data = [UInt8](repeating: 0x61, count: 26)
        data.withUnsafeBytes { HTTPSerializer.writeChunk($0, into: &out) }
        [UInt8]().withUnsafeBytes { HTTPSerializer.writeChunk($0, into: &out) }
        HTTPSerializer.writeLastChunk(trailers: HTTPHeaders([("X-Sum", "1")]), into: &out)
        HTTPSerializer.writeLastChunk(trailers: nil, into: &out)
        #expect(Self.text(out) == "1a\r\n" + String(repeating: "a", count: 26) + "\r\n0\r\nX-Sum: 1\r\n\r\n0\r\n\r\n")
        var big: [UInt8] = []
        [UInt8](repeating: 0, count: 4096).withUnsafeBytes { HTTPSerializer.writeChunk($0, into: &big) }
        #expect(Self.text(Array(big.prefix(6))) == "1000\r\n")
    }

    @Test func localResponseCarriesItsOwnFraming() {
        var out: [UInt8] = []
        HTTPSerializer.writeLocalResponse(
            status: 401,
            headers: HTTPHeaders([("Content-Type", "application/json"), ("Content-Length", "999"), ("Connection", "x")]
            ),
            body: Array("{}".utf8),
            keepAlive: false,
            into: &out
        )
        #expect(
            Self.text(out)
                == "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
        )
        out.removeAll()
        HTTPSerializer.writeLocalResponse(status: 204, headers: HTTPHeaders(), body: [], keepAlive: true, into: &out)
        #expect(Self.text(out) == "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
        out.removeAll()
        HTTPSerializer.writeLocalResponse(
            status: 200,
            headers: HTTPHeaders(),
            body: Array(repeating: 0x7A, count: 1234),
            keepAlive: true,
            into: &out
        )
        #expect(Self.text(out).hasPrefix("HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\nzzz"))
    }

    @Test func lineBreaksInValuesCannotInjectHeaders() {
        var out: [UInt8] = []
        let head = HTTPRequestHead(
            method: "GET",
            target: "/",
            headers: HTTPHeaders([("Host", "h"), ("X-Evil", "a\r\nTransfer-Encoding: chunked"), ("X-Nul", "a\u{0}b")])
        )
        HTTPSerializer.writeRequestHead(head, into: &out)
        #expect(
            Self.text(out) == "GET / HTTP/1.1\r\nHost: h\r\nX-Evil: a  Transfer-Encoding: chunked\r\nX-Nul: a b\r\n\r\n"
        )
    }

    @Test func continueResponse() {
        var out: [UInt8] = []
        HTTPSerializer.writeContinue(into: &out)
        #expect(Self.text(out) == "HTTP/1.1 100 Continue\r\n\r\n")
    }

    @Test func reasonPhrases() {
        #expect(HTTPSerializer.reasonPhrase(200) == "OK")
        #expect(HTTPSerializer.reasonPhrase(431) == "Request Header Fields Too Large")
        #expect(HTTPSerializer.reasonPhrase(502) == "Bad Gateway")
        #expect(HTTPSerializer.reasonPhrase(499) == "Client Error")
        for error in HTTPParserError.allCases {
            #expect(!HTTPSerializer.reasonPhrase(error.status).isEmpty)
        }
    }

    /// Parse → serialize → parse gives the same head, and the serialized form is canonical.
    @Test func parsedHeadsRoundTrip() {
        let inputs = [
            "GET /a?b HTTP/1.1\r\nHost: h\r\nX:   y  \r\nAccept: */*\r\n\r\n",
            "POST /p HTTP/1.0\nHost: h\nContent-Length: 0\n\n",
            "GET http://h:1/x HTTP/1.1\r\nHost: other\r\n\r\n",
        ]
        for input in inputs {
            let first = HTTPParserTestDriver.feedRequests(Array(input.utf8))
            guard let firstHead = Self.parsedHead(Array(input.utf8)) else {
                Issue.record("no head for \(input)")
                continue
            }
            var out: [UInt8] = []
            HTTPSerializer.writeRequestHead(firstHead, into: &out)
            guard let second = Self.parsedHead(out) else {
                Issue.record("serialized head does not parse: \(Self.text(out))")
                continue
            }
            #expect(second.method == firstHead.method && second.target == firstHead.target)
            #expect(
                second.headers.map { "\($0.name)=\($0.value)" } == firstHead.headers.map { "\($0.name)=\($0.value)" }
            )
            #expect(second.versionMinor == 1)
            #expect(first.violations.isEmpty)
        }
    }

    static func parsedHead(_ bytes: [UInt8]) -> HTTPRequestHead? {
        var parser = HTTPRequestParser()
        return bytes.withUnsafeBytes { buffer in
            if case .head(let head, _)? = parser.next(buffer).event { return head }
            return nil
        }
    }
}
