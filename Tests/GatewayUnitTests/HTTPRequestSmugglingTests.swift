import GatewayTesting
import Testing

@testable import HTTP1

/// Malformed and ambiguous requests, each refused with the right status, whatever the feed split.
/// Where a front proxy and a back end could disagree on where a request ends (CL.TE, TE.CL,
/// TE.TE, chunk-size tricks), the gateway refuses instead of guessing.
@Suite struct HTTPRequestSmugglingTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var request: String
        var status: Int
        var code: String
        var testDescription: String { self.name }
    }

    static let host = "Host: h\r\n"
    static let chunkedHead = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"

    static let cases: [Case] = [
        // CL.TE / TE.CL
        Case(
            name: "CL then TE",
            request: "POST / HTTP/1.1\r\n\(host)Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            status: 400,
            code: "content_length_with_transfer_encoding"
        ),
        Case(
            name: "TE then CL",
            request: "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
            status: 400,
            code: "content_length_with_transfer_encoding"
        ),
        Case(
            name: "TE identity and CL 0",
            request: "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: identity\r\nContent-Length: 0\r\n\r\n",
            status: 400,
            code: "content_length_with_transfer_encoding"
        ),
        // Content-Length
        Case(
            name: "differing duplicate CL",
            request: "POST / HTTP/1.1\r\n\(host)Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
            status: 400,
            code: "duplicate_content_length"
        ),
        Case(
            name: "identical duplicate CL (as nginx)",
            request: "POST / HTTP/1.1\r\n\(host)Content-Length: 3\r\ncontent-length: 3\r\n\r\nabc",
            status: 400,
            code: "duplicate_content_length"
        ),
        Case(
            name: "CL list",
            request: "POST / HTTP/1.1\r\n\(host)Content-Length: 3, 3\r\n\r\nabc",
            status: 400,
            code: "invalid_content_length"
        ),
        Case(
            name: "CL with plus sign",
            request: "POST / HTTP/1.1\r\n\(host)Content-Length: +3\r\n\r\nabc",
            status: 400,
            code: "invalid_content_length"
        ),
        Case(
            name: "negative CL",
            request: "POST / HTTP/1.1\r\n\(host)Content-Length: -1\r\n\r\n",
            status: 400,
            code: "invalid_content_length"
        ),
        Case(
            name: "hex CL",
            request: "POST / HTTP/1.1\r\n\(host)Content-Length: 0x3\r\n\r\nabc",
            status: 400,
            code: "invalid_content_length"
        ),
        Case(
            name: "CL with inner space",
            request: "POST / HTTP/1.1\r\n\(host)Content-Length: 1 0\r\n\r\n",
            status: 400,
            code: "invalid_content_length"
        ),
        Case(
            name: "empty CL",
            request: "POST / HTTP/1.1\r\n\(host)Content-Length:\r\n\r\n",
            status: 400,
            code: "invalid_content_length"
        ),
        Case(
            name: "CL overflow",
            request: "POST / HTTP/1.1\r\n\(host)Content-Length: 18446744073709551617\r\n\r\n",
            status: 400,
            code: "invalid_content_length"
        ),
        // Transfer-Encoding
        Case(
            name: "final coding gzip after chunked",
            request: "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: chunked, gzip\r\n\r\n",
            status: 400,
            code: "invalid_transfer_encoding"
        ),
        Case(
            name: "only gzip",
            request: "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: gzip\r\n\r\n",
            status: 400,
            code: "invalid_transfer_encoding"
        ),
        Case(
            name: "unknown coding",
            request: "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: foo\r\n\r\n",
            status: 501,
            code: "unsupported_transfer_coding"
        ),
        Case(
            name: "near-miss chunked",
            request: "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: xchunked\r\n\r\n",
            status: 501,
            code: "unsupported_transfer_coding"
        ),
        Case(
            name: "gzip then chunked",
            request: "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            status: 501,
            code: "unsupported_transfer_coding"
        ),
        Case(
            name: "chunked twice in a list",
            request: "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: chunked, chunked\r\n\r\n",
            status: 400,
            code: "invalid_transfer_encoding"
        ),
        Case(
            name: "chunked twice in two lines",
            request: "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            status: 400,
            code: "invalid_transfer_encoding"
        ),
        Case(
            name: "chunked then identity line",
            request: "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n",
            status: 400,
            code: "invalid_transfer_encoding"
        ),
        Case(
            name: "chunked with a parameter",
            request: "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: chunked;q=1\r\n\r\n",
            status: 400,
            code: "invalid_transfer_encoding"
        ),
        Case(
            name: "empty TE",
            request: "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: \r\n\r\n",
            status: 400,
            code: "invalid_transfer_encoding"
        ),
        Case(
            name: "TE with HTTP/1.0",
            request: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            status: 400,
            code: "invalid_transfer_encoding"
        ),
        Case(
            name: "vertical tab before chunked",
            request: "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: \u{0B}chunked\r\n\r\n",
            status: 400,
            code: "invalid_header_value"
        ),
        Case(
            name: "TE folded onto the next line",
            request: "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n identity\r\n\r\n",
            status: 400,
            code: "obsolete_line_folding"
        ),
        Case(
            name: "space before colon in TE",
            request: "POST / HTTP/1.1\r\n\(host)Transfer-Encoding : chunked\r\n\r\n",
            status: 400,
            code: "whitespace_before_colon"
        ),
        Case(
            name: "tab before colon in CL",
            request: "POST / HTTP/1.1\r\n\(host)Content-Length\t: 3\r\n\r\nabc",
            status: 400,
            code: "whitespace_before_colon"
        ),
        Case(
            name: "space inside a name",
            request: "POST / HTTP/1.1\r\n\(host)Content Length: 3\r\n\r\nabc",
            status: 400,
            code: "whitespace_before_colon"
        ),
        Case(
            name: "first field line folded",
            request: "GET / HTTP/1.1\r\n Host: h\r\n\r\n",
            status: 400,
            code: "obsolete_line_folding"
        ),
        // Field syntax
        Case(
            name: "bare CR in a value",
            request: "GET / HTTP/1.1\r\n\(host)X: a\rTransfer-Encoding: chunked\r\n\r\n",
            status: 400,
            code: "bare_carriage_return"
        ),
        Case(
            name: "NUL in a value",
            request: "GET / HTTP/1.1\r\n\(host)X: a\u{0}b\r\n\r\n",
            status: 400,
            code: "invalid_header_value"
        ),
        Case(
            name: "DEL in a value",
            request: "GET / HTTP/1.1\r\n\(host)X: a\u{7F}\r\n\r\n",
            status: 400,
            code: "invalid_header_value"
        ),
        Case(
            name: "non-token byte in a name",
            request: "GET / HTTP/1.1\r\n\(host)X(y): 1\r\n\r\n",
            status: 400,
            code: "invalid_header_name"
        ),
        Case(
            name: "empty name",
            request: "GET / HTTP/1.1\r\n\(host): 1\r\n\r\n",
            status: 400,
            code: "invalid_header_name"
        ),
        Case(
            name: "no colon",
            request: "GET / HTTP/1.1\r\n\(host)Novalue\r\n\r\n",
            status: 400,
            code: "invalid_header_name"
        ),
        // Chunked framing
        Case(name: "non-hex chunk size", request: chunkedHead + "zz\r\n", status: 400, code: "invalid_chunk_size"),
        Case(
            name: "negative chunk size",
            request: chunkedHead + "-5\r\nabcde\r\n0\r\n\r\n",
            status: 400,
            code: "invalid_chunk_size"
        ),
        Case(
            name: "0x chunk size",
            request: chunkedHead + "0x5\r\nabcde\r\n0\r\n\r\n",
            status: 400,
            code: "invalid_chunk_extension"
        ),
        Case(
            name: "chunk size overflow",
            request: chunkedHead + "10000000000000001\r\n",
            status: 400,
            code: "chunk_size_overflow"
        ),
        Case(
            name: "chunk size line ended by bare LF",
            request: chunkedHead + "5\nabcde\r\n0\r\n\r\n",
            status: 400,
            code: "invalid_chunk_terminator"
        ),
        Case(
            name: "chunk data longer than its size",
            request: chunkedHead + "3\r\nabcde\r\n0\r\n\r\n",
            status: 400,
            code: "invalid_chunk_terminator"
        ),
        Case(
            name: "chunk data ended by bare LF",
            request: chunkedHead + "3\r\nabc\n0\r\n\r\n",
            status: 400,
            code: "invalid_chunk_terminator"
        ),
        Case(
            name: "bare LF inside a chunk extension",
            request: chunkedHead + "3;a\nb\r\nabc\r\n0\r\n\r\n",
            status: 400,
            code: "invalid_chunk_terminator"
        ),
        Case(
            name: "bare CR inside a chunk extension",
            request: chunkedHead + "3;a\rb\r\nabc\r\n0\r\n\r\n",
            status: 400,
            code: "bare_carriage_return"
        ),
        Case(
            name: "chunk size with trailing space",
            request: chunkedHead + "3 \r\nabc\r\n0\r\n\r\n",
            status: 400,
            code: "invalid_chunk_extension"
        ),
        Case(
            name: "chunk extension without a name",
            request: chunkedHead + "3;\r\nabc\r\n0\r\n\r\n",
            status: 400,
            code: "invalid_chunk_extension"
        ),
        Case(
            name: "unterminated quoted chunk extension",
            request: chunkedHead + "3;a=\"b\r\nabc\r\n0\r\n\r\n",
            status: 400,
            code: "invalid_chunk_extension"
        ),
        Case(name: "empty chunk size", request: chunkedHead + "\r\n", status: 400, code: "invalid_chunk_size"),
        // Request line
        Case(name: "HTTP/0.9", request: "GET /\r\n\r\n", status: 400, code: "http_0_9_not_supported"),
        Case(name: "HTTP/2.0 line", request: "GET / HTTP/2.0\r\n\(host)\r\n", status: 505, code: "unsupported_version"),
        Case(name: "HTTP/1.2", request: "GET / HTTP/1.2\r\n\(host)\r\n", status: 505, code: "unsupported_version"),
        Case(name: "lowercase version", request: "GET / http/1.1\r\n\(host)\r\n", status: 400, code: "invalid_version"),
        Case(
            name: "version with trailing garbage",
            request: "GET / HTTP/1.1x\r\n\(host)\r\n",
            status: 400,
            code: "invalid_version"
        ),
        Case(
            name: "two spaces after method",
            request: "GET  / HTTP/1.1\r\n\(host)\r\n",
            status: 400,
            code: "invalid_request_line"
        ),
        Case(
            name: "space in target",
            request: "GET /a b HTTP/1.1\r\n\(host)\r\n",
            status: 400,
            code: "invalid_version"
        ),
        Case(
            name: "control byte in target",
            request: "GET /a\u{01}b HTTP/1.1\r\n\(host)\r\n",
            status: 400,
            code: "invalid_request_target"
        ),
        Case(
            name: "non-ASCII in target",
            request: "GET /caf\u{e9} HTTP/1.1\r\n\(host)\r\n",
            status: 400,
            code: "invalid_request_target"
        ),
        Case(name: "tab as separator", request: "GET\t/ HTTP/1.1\r\n\(host)\r\n", status: 400, code: "invalid_method"),
        Case(
            name: "asterisk-form",
            request: "OPTIONS * HTTP/1.1\r\n\(host)\r\n",
            status: 400,
            code: "invalid_request_target"
        ),
        Case(
            name: "authority-form",
            request: "GET example.com:443 HTTP/1.1\r\n\(host)\r\n",
            status: 400,
            code: "invalid_request_target"
        ),
        Case(
            name: "CONNECT",
            request: "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
            status: 405,
            code: "connect_not_supported"
        ),
        Case(
            name: "absolute-form with userinfo",
            request: "GET http://user@h/ HTTP/1.1\r\n\(host)\r\n",
            status: 400,
            code: "invalid_request_target"
        ),
        Case(
            name: "absolute-form with another scheme",
            request: "GET ftp://h/ HTTP/1.1\r\n\(host)\r\n",
            status: 400,
            code: "invalid_request_target"
        ),
        // Host
        Case(name: "HTTP/1.1 without Host", request: "GET / HTTP/1.1\r\n\r\n", status: 400, code: "missing_host"),
        Case(
            name: "two Host lines",
            request: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            status: 400,
            code: "duplicate_host"
        ),
        Case(
            name: "Host with a path",
            request: "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n",
            status: 400,
            code: "invalid_host"
        ),
        Case(
            name: "Host with userinfo",
            request: "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n",
            status: 400,
            code: "invalid_host"
        ),
        Case(name: "empty Host", request: "GET / HTTP/1.1\r\nHost:\r\n\r\n", status: 400, code: "invalid_host"),
    ]

    @Test(arguments: Self.cases)
    func refused(_ testCase: Case) {
        let transcript = HTTPRequestParserTests.parseAllWays(testCase.request)
        #expect(transcript.errorCode == testCase.code, "\(transcript)")
        let error = HTTPParserError.allCases.first { $0.code == testCase.code }
        #expect(error?.status == testCase.status)
        // Nothing of a refused head reaches the upstream: no head event before a head error.
        if !testCase.request.hasPrefix(Self.chunkedHead) {
            #expect(transcript.lines.count == 1, "\(transcript)")
        }
    }

    @Test func atLeastTwentyCases() {
        #expect(Self.cases.count >= 20)
        #expect(Set(Self.cases.map(\.name)).count == Self.cases.count)
    }
}
