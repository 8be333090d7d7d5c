import GatewayTesting
import Testing

@testable import HTTP1

@Suite struct HTTPRequestParserTests {
    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// Parses `text` whole, byte by byte and in random splits; all must agree. Returns the transcript.
    static func parseAllWays(
        _ text: String,
        limits: HTTPParserLimits = .init(),
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> HTTPParserTranscript {
        let input = Self.bytes(text)
        let whole = HTTPParserTestDriver.feedRequests(input, limits: limits)
        #expect(whole.violations.isEmpty, "\(whole)", sourceLocation: sourceLocation)
        let single = HTTPParserTestDriver.feedRequests(
            input,
            cuts: HTTPParserTestDriver.byteByByte(input.count),
            limits: limits
        )
        #expect(single == whole, "byte by byte:\n\(single)\nwhole:\n\(whole)", sourceLocation: sourceLocation)
        var random = SplitMix64(state: UInt64(input.count))
        for _ in 0..<20 {
            let cuts = random.cuts(count: input.count, maxCuts: 6)
            let split = HTTPParserTestDriver.feedRequests(input, cuts: cuts, limits: limits)
            #expect(split == whole, "cuts \(cuts):\n\(split)\nwhole:\n\(whole)", sourceLocation: sourceLocation)
        }
        return whole
    }

    @Test func simpleGetGivesHeadThenEndWithoutConsuming() throws {
        var parser = HTTPRequestParser()
        let input = Self.bytes("GET /a?b=c HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n")
        try input.withUnsafeBytes { buffer in
            let (event, consumed) = parser.next(buffer)
            #expect(consumed == input.count)
            guard case .head(let head, let info)? = event else {
                Issue.record("expected a head, got \(String(describing: event))")
                return
            }
            #expect(head.method == "GET")
            #expect(head.target == "/a?b=c")
            #expect(head.versionMinor == 1)
            #expect(head.headers["host"] == "example.com")
            #expect(head.headers["ACCEPT"] == "*/*")
            #expect(info == HTTPRequestInfo(framing: .none, isKeepAlive: true, expectsContinue: false))

            let rest = UnsafeRawBufferPointer(rebasing: buffer[consumed...])
            let (end, endConsumed) = parser.next(rest)
            #expect(endConsumed == 0)
            guard case .end(let trailers)? = end else {
                Issue.record("expected end")
                return
            }
            #expect(trailers == nil)
            let (none, noneConsumed) = parser.next(rest)
            #expect(none == nil && noneConsumed == 0)
            #expect(parser.isAtMessageBoundary)
            _ = try #require(Optional(head))
        }
    }

    @Test func contentLengthBody() {
        let transcript = Self.parseAllWays(
            "POST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world"
        )
        #expect(
            transcript.lines == [
                "head POST /upload 1.1 contentLength(11) keepAlive=true continue=false [Host: h][Content-Length: 11]",
                "body hello world",
                "end -",
            ]
        )
        #expect(transcript.leftover == 0)
    }

    @Test func contentLengthZeroEndsAtOnce() {
        let transcript = Self.parseAllWays("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n")
        #expect(transcript.lines.count == 2)
        #expect(transcript.lines[0].contains("contentLength(0)"))
        #expect(transcript.lines[1] == "end -")
    }

    @Test func chunkedBodyWithExtensionsAndTrailers() {
        let transcript = Self.parseAllWays(
            "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "5;name=value;flag\r\nhello\r\n"
                + "6 ; q=\"a \\\"b\\\"\"\r\n world\r\n"
                + "000\r\nX-Checksum: abc\r\nX-Other:  d \r\n\r\n"
        )
        #expect(
            transcript.lines == [
                "head POST /c 1.1 chunked keepAlive=true continue=false [Host: h][Transfer-Encoding: chunked]",
                "body hello world",
                "end [X-Checksum: abc][X-Other: d]",
            ]
        )
    }

    @Test func chunkedBodyRangesIndexTheBuffer() {
        var parser = HTTPRequestParser()
        let head = Self.bytes("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
        head.withUnsafeBytes { buffer in
            let (event, consumed) = parser.next(buffer)
            #expect(consumed == head.count)
            if case .head(_, let info)? = event { #expect(info.framing == .chunked) } else { Issue.record("no head") }
        }
        let body = Self.bytes("3\r\nabc\r\n0\r\n\r\n")
        body.withUnsafeBytes { buffer in
            let (event, consumed) = parser.next(buffer)
            if case .body(let range)? = event { #expect(range == 3..<6) } else { Issue.record("expected body") }
            #expect(consumed == 6)
            let rest = UnsafeRawBufferPointer(rebasing: buffer[6...])
            let (end, endConsumed) = parser.next(rest)
            #expect(endConsumed == rest.count)
            if case .end(nil)? = end {} else { Issue.record("expected end, got \(String(describing: end))") }
        }
    }

    @Test func chunkSizeLineIsNotConsumedBeforeData() {
        var parser = HTTPRequestParser()
        let head = Self.bytes("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
        head.withUnsafeBytes { _ = parser.next($0) }
        Self.bytes("a\r\n").withUnsafeBytes { buffer in
            let (event, consumed) = parser.next(buffer)
            #expect(event == nil && consumed == 0)
        }
    }

    @Test(arguments: [
        ("GET / HTTP/1.1\r\nHost: h\r\n\r\n", true),
        ("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", false),
        ("GET / HTTP/1.1\r\nHost: h\r\nConnection: Keep-Alive, CLOSE\r\n\r\n", false),
        ("GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nConnection: close\r\n\r\n", false),
        ("GET / HTTP/1.1\r\nHost: h\r\nConnection: closed\r\n\r\n", true),
        ("GET / HTTP/1.0\r\n\r\n", false),
        ("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true),
        ("GET / HTTP/1.0\r\nConnection: foo,  keep-alive \r\n\r\n", true),
        ("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", false),
    ])
    func keepAliveFollowsVersionAndConnectionTokens(request: String, keepAlive: Bool) {
        let transcript = Self.parseAllWays(request)
        #expect(transcript.lines.first?.contains("keepAlive=\(keepAlive)") == true, "\(transcript)")
    }

    @Test func pipelinedRequestsComeOutInOrder() {
        let transcript = Self.parseAllWays(
            "GET /1 HTTP/1.1\r\nHost: h\r\n\r\n"
                + "POST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
                + "POST /3 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nxy\r\n0\r\n\r\n"
                + "\r\nGET /4 HTTP/1.0\r\n\r\n"
                + "GET /5 HTTP/1.1\r\nHo"
        )
        #expect(
            transcript.lines == [
                "head GET /1 1.1 none keepAlive=true continue=false [Host: h]",
                "end -",
                "head POST /2 1.1 contentLength(3) keepAlive=true continue=false [Host: h][Content-Length: 3]",
                "body abc",
                "end -",
                "head POST /3 1.1 chunked keepAlive=true continue=false [Host: h][Transfer-Encoding: chunked]",
                "body xy",
                "end -",
                "head GET /4 1.0 none keepAlive=false continue=false ",
                "end -",
            ]
        )
        #expect(transcript.leftover == Self.bytes("GET /5 HTTP/1.1\r\nHo").count)
    }

    @Test func expectContinueIsReportedForHTTP11Only() {
        let yes = Self.parseAllWays(
            "PUT /x HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\nz"
        )
        #expect(yes.lines.first?.contains("continue=true") == true)
        let old = Self.parseAllWays("PUT /x HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nz")
        #expect(old.lines.first?.contains("continue=false") == true)
        let other = Self.parseAllWays("PUT /x HTTP/1.1\r\nHost: h\r\nExpect: something\r\n\r\n")
        #expect(other.lines.first?.contains("continue=false") == true)
    }

    @Test func leadingEmptyLinesAndBareLineFeedsAreAccepted() {
        let transcript = Self.parseAllWays("\r\n\nGET / HTTP/1.1\nHost: h\nX: 1\r\n\n")
        #expect(
            transcript.lines == ["head GET / 1.1 none keepAlive=true continue=false [Host: h][X: 1]", "end -"]
        )
    }

    /// Found by the long fuzz run: a CR as the limit's last byte of the leading empty lines was
    /// judged by the byte after it (past the limit) when the buffer was whole (bare CR) and as
    /// 414 when fed in pieces; the byte past the limit must not decide.
    @Test func aCarriageReturnAtTheLimitIsJudgedTheSameHoweverTheBytesArrive() {
        let text = String(repeating: "\n", count: 63) + "\r\u{b7}\n\n"
        let transcript = Self.parseAllWays(text, limits: HTTPParserLimits(maxHeaderBytes: 64, maxHeaderCount: 4))
        #expect(transcript.lines == ["error request_line_too_long"])
    }

    @Test func fieldValuesAreTrimmedAndMayBeEmptyOrUTF8() {
        let transcript = Self.parseAllWays(
            "GET / HTTP/1.1\r\nHost:h\r\nX-Empty:\r\nX-Tabs: \t a \t b \t\r\nX-Utf8: caf\u{e9}\r\n\r\n"
        )
        #expect(transcript.lines.first?.hasSuffix("[Host: h][X-Empty: ][X-Tabs: a \t b][X-Utf8: caf\u{e9}]") == true)
    }

    /// The value check runs eight bytes at a time: put each bad byte at every position of a long value.
    @Test(arguments: [UInt8(0x00), 0x01, 0x08, 0x0B, 0x0D, 0x1F, 0x7F])
    func controlBytesAnywhereInALongValueAreRefused(bad: UInt8) {
        for position in 0..<24 {
            var value = Array(repeating: UInt8(ascii: "v"), count: 24)
            value[position] = bad
            if position == 0 || position == 23, bad == 0x0D { continue }  // would be a line end / OWS case
            let input = Self.bytes("GET / HTTP/1.1\r\nHost: h\r\nX: ") + value + Self.bytes("\r\n\r\n")
            let transcript = HTTPParserTestDriver.feedRequests(input)
            let expected = bad == 0x0D ? "bare_carriage_return" : "invalid_header_value"
            #expect(transcript.errorCode == expected, "byte \(bad) at \(position): \(transcript)")
        }
    }

    @Test func tabsSpacesAndUTF8AnywhereInALongValueAreKept() {
        let value = "a\tb c~d\u{e9}e\u{1F600}f" + String(repeating: "g\t", count: 8) + "h"
        let transcript = Self.parseAllWays("GET / HTTP/1.1\r\nHost: h\r\nX: \(value)\r\n\r\n")
        #expect(transcript.lines.first?.hasSuffix("[X: \(value)]") == true, "\(transcript)")
    }

    @Test func fieldsWithUnderscoresInTheNameAreDroppedFromRequests() {
        let text =
            "POST / HTTP/1.1\r\nHost: h\r\nX_App_Attest_Status: verified\r\nX-Kept: 1\r\n"
            + "Content_Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX_Trailer: a\r\nX-T: b\r\n\r\n"
        let transcript = Self.parseAllWays(text)
        #expect(
            transcript.lines == [
                "head POST / 1.1 chunked keepAlive=true continue=false [Host: h][X-Kept: 1][Transfer-Encoding: chunked]",
                "end [X-T: b]",
            ]
        )
        // Dropped lines still count, and must still be valid.
        let counted = Self.parseAllWays(
            "GET / HTTP/1.1\r\nHost: h\r\nA_1: x\r\nA_2: y\r\n\r\n",
            limits: HTTPParserLimits(maxHeaderBytes: 16384, maxHeaderCount: 2)
        )
        #expect(counted.lines == ["error too_many_headers"])
        #expect(
            Self.parseAllWays("GET / HTTP/1.1\r\nHost: h\r\nA_1: \u{1}\r\n\r\n").errorCode == "invalid_header_value")
        // Configurable, as nginx's underscores_in_headers.
        var keep = HTTPParserLimits()
        keep.dropsUnderscoreFieldNames = false
        let kept = Self.parseAllWays("GET / HTTP/1.1\r\nHost: h\r\nX_Y: z\r\n\r\n", limits: keep)
        #expect(kept.lines.first?.hasSuffix("[Host: h][X_Y: z]") == true)
    }

    @Test func invalidUTF8InAValueIsRefused() {
        var input = Self.bytes("GET / HTTP/1.1\r\nHost: h\r\nX: a")
        input.append(0xFF)
        input += Self.bytes("\r\n\r\n")
        let transcript = HTTPParserTestDriver.feedRequests(input)
        #expect(transcript.errorCode == "invalid_header_value")
    }

    @Test func absoluteFormBecomesOriginFormAndSetsHost() {
        let transcript = Self.parseAllWays(
            "GET http://api.example.com:8080/v1/x?y=1 HTTP/1.1\r\nHost: other\r\n\r\n"
                + "GET HTTPS://api.example.com HTTP/1.1\r\nHost: other\r\n\r\n"
                + "GET http://a.example?q HTTP/1.0\r\n\r\n"
        )
        #expect(
            transcript.lines == [
                "head GET /v1/x?y=1 1.1 none keepAlive=true continue=false [Host: api.example.com:8080]",
                "end -",
                "head GET / 1.1 none keepAlive=true continue=false [Host: api.example.com]",
                "end -",
                "head GET /?q 1.0 none keepAlive=false continue=false [Host: a.example]",
                "end -",
            ]
        )
    }

    @Test func requestLineLongerThanTheLimitIs414() {
        var limits = HTTPParserLimits(maxHeaderBytes: 64)
        limits.maxHeaderCount = 4
        let long = "GET /" + String(repeating: "a", count: 80) + " HTTP/1.1\r\nHost: h\r\n\r\n"
        let transcript = Self.parseAllWays(long, limits: limits)
        #expect(transcript.lines == ["error request_line_too_long"])
        #expect(HTTPParserError.requestLineTooLong.status == 414)
    }

    /// Found by the fuzzer: the whole buffer looked past the limit (blank lines, then a bad method)
    /// where a byte-by-byte feed had to stop at the limit.
    @Test func noDecisionLooksPastTheHeadLimit() {
        let limits = HTTPParserLimits(maxHeaderBytes: 64)
        let blankLines = String(repeating: "\n", count: 114) + "\u{7F}OTUnsafeku"
        #expect(Self.parseAllWays(blankLines, limits: limits).lines == ["error request_line_too_long"])
        let lateGarbage = String(repeating: "\r\n", count: 25) + "GETGETGETGETGETGET\u{7F}"
        #expect(Self.parseAllWays(lateGarbage, limits: limits).lines == ["error request_line_too_long"])
        let blankThenRequest = String(repeating: "\r\n", count: 10) + "GET / HTTP/1.1\r\nHost: h\r\n\r\n"
        #expect(Self.parseAllWays(blankThenRequest, limits: limits).lines.count == 2)
    }

    @Test func headersLargerThanTheLimitAre431() {
        let limits = HTTPParserLimits(maxHeaderBytes: 64)
        let large = "GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + String(repeating: "b", count: 60) + "\r\n\r\n"
        #expect(Self.parseAllWays(large, limits: limits).lines == ["error headers_too_large"])
        // Exactly at the limit is accepted.
        let fits = "GET / HTTP/1.1\r\nHost: h\r\nX: " + String(repeating: "b", count: 64 - 32) + "\r\n\r\n"
        #expect(fits.utf8.count == 64)
        #expect(Self.parseAllWays(fits, limits: limits).lines.count == 2)
        let over = "GET / HTTP/1.1\r\nHost: h\r\nX: " + String(repeating: "b", count: 64 - 31) + "\r\n\r\n"
        #expect(Self.parseAllWays(over, limits: limits).lines == ["error headers_too_large"])
    }

    @Test func headNearTheDefaultLimitParsesInEverySplit() {
        var text = "\r\n\r\nGET /" + String(repeating: "p", count: 6000) + " HTTP/1.1\r\nHost: h\r\n"
        for index in 0..<90 {
            text += "X-Field-\(index): " + String(repeating: "v", count: 100) + "\r\n"
        }
        text += "\r\n"
        #expect(text.utf8.count < 16384)
        let transcript = Self.parseAllWays(text)
        #expect(transcript.lines.count == 2)
        #expect(transcript.lines.first?.hasPrefix("head GET /ppp") == true)
    }

    @Test func moreHeadersThanTheCountLimitAre431() {
        let limits = HTTPParserLimits(maxHeaderBytes: 16384, maxHeaderCount: 3)
        let ok = Self.parseAllWays("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", limits: limits)
        #expect(ok.lines.count == 2)
        let tooMany = Self.parseAllWays("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits: limits)
        #expect(tooMany.lines == ["error too_many_headers"])
        #expect(HTTPParserError.tooManyHeaders.status == 431)
    }

    @Test func trailersOverTheLimitAre431() {
        var limits = HTTPParserLimits()
        limits.maxTrailerBytes = 16
        let transcript = Self.parseAllWays(
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Trailer: 0123456789\r\n\r\n",
            limits: limits
        )
        #expect(transcript.errorCode == "trailers_too_large")
    }

    @Test func bodyLimitGives413ForContentLengthAndChunked() {
        var limits = HTTPParserLimits()
        limits.maxBodyBytes = 4
        let fixed = Self.parseAllWays("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello", limits: limits)
        #expect(fixed.lines == ["error body_too_large"])
        let chunked = Self.parseAllWays(
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
            limits: limits
        )
        #expect(chunked.bodies == ["abc"])
        #expect(chunked.errorCode == "body_too_large")
        #expect(HTTPParserError.bodyTooLarge.status == 413)
    }

    @Test func errorsAreStickyAndConsumeNothing() {
        var parser = HTTPRequestParser()
        Self.bytes("GET / HTTP/9.9\r\n\r\n").withUnsafeBytes { buffer in
            for _ in 0..<3 {
                let (event, consumed) = parser.next(buffer)
                #expect(consumed == 0)
                if case .error(let error)? = event {
                    #expect(error == .unsupportedVersion)
                    #expect(error.status == 505)
                } else {
                    Issue.record("expected error")
                }
            }
        }
        #expect(parser.hasFailed)
        Self.bytes("GET / HTTP/1.1\r\nHost: h\r\n\r\n").withUnsafeBytes { buffer in
            if case .error? = parser.next(buffer).event {} else { Issue.record("parser recovered") }
        }
    }

    @Test func garbageIsRefusedBeforeALineEnds() {
        // A TLS ClientHello sent to the plain-text port: no LF, refused on the first bytes.
        let transcript = HTTPParserTestDriver.feedRequests([0x16, 0x03, 0x01, 0x02, 0x00])
        #expect(transcript.lines == ["error invalid_method"])
    }

    @Test func everySplitGivesTheSameEventsOverACorpus() {
        let corpus = [
            "GET / HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
            "POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nA: b\r\n\r\n",
            "PUT /q HTTP/1.1\r\nHost: h\r\nContent-Length: 20\r\n\r\n01234567890123456789GET / HTTP/1.1\r\nHost: h\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcdeXX",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\"\\\r\"\r\nabcde\r\n0\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\n\r\r\n",
            "\r\r\nGET / HTTP/1.1\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r",
        ]
        for text in corpus {
            let transcript = Self.parseAllWays(text)
            #expect(!transcript.lines.isEmpty || transcript.leftover > 0)
        }
    }

    /// Host characters (RFC 3986 reg-name / IP-literal and a port), byte by byte over all 256.
    @Test func hostAcceptsExactlyTheAuthorityCharacters() {
        let extra = Array("-._~!$&'()*+,;=:[]%".utf8)
        for byte in 0...255 {
            let b = UInt8(byte)
            let allowed =
                (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || (0x30...0x39).contains(b) || extra.contains(b)
            let accepted = [b].withUnsafeBytes { buffer in
                (try? HTTPHeadFacts.validateAuthority(buffer, 0..<1)) != nil
            }
            #expect(accepted == allowed, "byte \(byte)")
        }
        let empty: [UInt8] = []
        _ = empty.withUnsafeBytes { buffer in
            #expect(throws: HTTPParserError.invalidHost) { try HTTPHeadFacts.validateAuthority(buffer, 0..<0) }
        }
    }

    /// Common field names come from literals; every name must read as its own bytes.
    @Test func fieldNamesAreTheirBytesCommonOrNot() {
        let names = [
            "Host", "host", "HOST", "Hosu", "Accept", "Cookie", "accept", "Accepx", "User-Agent", "Connection",
            "connection", "User-agenT", "Content-Type", "Authorization", "Cache-Control", "Content-Length",
            "Accept-Encoding", "X-Forwarded-For", "x-forwarded-for", "Accept-Encodinh", "X-Forwarded-Fox", "A",
            "Keep-Alive", "Transfer-Encoding", "X-App-Attest-Key-Id",
        ]
        for name in names {
            let bytes = Array(("x" + name + "y").utf8)  // at an offset, with bytes after it
            bytes.withUnsafeBytes { buffer in
                let range = 1..<(1 + name.utf8.count)
                #expect(HTTPFieldParser.nameString(buffer, range) == name)
            }
        }
    }
}
