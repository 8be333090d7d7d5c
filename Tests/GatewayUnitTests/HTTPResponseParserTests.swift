import GatewayTesting
import Testing

@testable import HTTP1

@Suite struct HTTPResponseParserTests {
    /// Parses whole, byte by byte and in random splits; all must agree.
    static func parseAllWays(
        _ text: String,
        methods: [String] = ["GET"],
        peerClosesAtEnd: Bool = true,
        limits: HTTPParserLimits = .init(),
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> HTTPParserTranscript {
        let input = Array(text.utf8)
        let whole = HTTPParserTestDriver.feedResponses(
            input,
            methods: methods,
            peerClosesAtEnd: peerClosesAtEnd,
            limits: limits
        )
        #expect(whole.violations.isEmpty, "\(whole)", sourceLocation: sourceLocation)
        let single = HTTPParserTestDriver.feedResponses(
            input,
            methods: methods,
            cuts: HTTPParserTestDriver.byteByByte(input.count),
            peerClosesAtEnd: peerClosesAtEnd,
            limits: limits
        )
        #expect(single == whole, "byte by byte:\n\(single)\nwhole:\n\(whole)", sourceLocation: sourceLocation)
        // The proxy's mode (`.rawHead`, fields as ranges) stands for the same heads, whole and split.
        for cuts in [[], HTTPParserTestDriver.byteByByte(input.count)] {
            let raw = HTTPParserTestDriver.feedResponses(
                input,
                methods: methods,
                cuts: cuts,
                peerClosesAtEnd: peerClosesAtEnd,
                limits: limits,
                rawHeads: true
            )
            #expect(
                raw == whole, "raw heads, \(cuts.count) cuts:\n\(raw)\nwhole:\n\(whole)", sourceLocation: sourceLocation
            )
        }
        var random = SplitMix64(state: UInt64(input.count) &+ 7)
        for _ in 0..<20 {
            let cuts = random.cuts(count: input.count, maxCuts: 6)
            let split = HTTPParserTestDriver.feedResponses(
                input,
                methods: methods,
                cuts: cuts,
                peerClosesAtEnd: peerClosesAtEnd,
                limits: limits
            )
            #expect(split == whole, "cuts \(cuts):\n\(split)\nwhole:\n\(whole)", sourceLocation: sourceLocation)
        }
        return whole
    }

    @Test func contentLengthResponse() {
        let transcript = Self.parseAllWays("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: y\r\n\r\nhello")
        #expect(
            transcript.lines == [
                "head 200 OK 1.1 contentLength(5) keepAlive=true [Content-Length: 5][X: y]",
                "body hello",
                "end -",
                "closed: idle",
            ]
        )
    }

    @Test func chunkedResponseWithTrailers() {
        let transcript = Self.parseAllWays(
            "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nwiki\r\n5;ext=1\r\npedia\r\n0\r\nServer-Timing: db;dur=53\r\n\r\n"
        )
        #expect(
            transcript.lines == [
                "head 201 Created 1.1 chunked keepAlive=true [Transfer-Encoding: chunked]",
                "body wikipedia",
                "end [Server-Timing: db;dur=53]",
                "closed: idle",
            ]
        )
    }

    @Test func closeDelimitedBodyEndsWhenThePeerCloses() {
        let transcript = Self.parseAllWays(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it\r\nuntil close"
        )
        #expect(
            transcript.lines == [
                "head 200 OK 1.1 untilClose keepAlive=false [Content-Type: text/plain]",
                "body all of it\\x0d\\x0auntil close",
                "closed:",
                "end -",
            ]
        )
    }

    @Test func truncatedBodiesAreErrorsWhenThePeerCloses() {
        let fixed = Self.parseAllWays("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort")
        #expect(fixed.lines.suffix(2) == ["closed:", "error truncated_message"])
        let chunked = Self.parseAllWays("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n")
        #expect(chunked.lines.suffix(2) == ["closed:", "error truncated_message"])
        let head = Self.parseAllWays("HTTP/1.1 200 OK\r\nContent-Le")
        #expect(head.lines == ["closed:", "error truncated_message"])
        let nothing = Self.parseAllWays("", methods: ["GET"])
        #expect(nothing.lines == ["closed:", "error truncated_message"])
        let idle = Self.parseAllWays("", methods: [])
        #expect(idle.lines == ["closed: idle"])
        #expect(HTTPParserError.truncatedMessage.status == 502)
    }

    @Test func informationalResponsesPrecedeTheFinalOne() {
        let transcript = Self.parseAllWays(
            "HTTP/1.1 100 Continue\r\n\r\n"
                + "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
                + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        )
        #expect(
            transcript.lines == [
                "informational 100 ",
                "informational 103 [Link: </style.css>; rel=preload]",
                "head 200 OK 1.1 contentLength(2) keepAlive=true [Content-Length: 2]",
                "body ok",
                "end -",
                "closed: idle",
            ]
        )
    }

    @Test func headAnswers204And304HaveNoBody() {
        let transcript = Self.parseAllWays(
            "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
                + "HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n"
                + "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
            methods: ["HEAD", "GET", "GET", "GET"]
        )
        #expect(
            transcript.lines == [
                "head 200 OK 1.1 none keepAlive=true [Content-Length: 1000]",
                "end -",
                "head 204 No Content 1.1 none keepAlive=true [Content-Length: 7]",
                "end -",
                "head 304 Not Modified 1.1 none keepAlive=true [Transfer-Encoding: chunked]",
                "end -",
                "head 200 OK 1.1 contentLength(3) keepAlive=true [Content-Length: 3]",
                "body abc",
                "end -",
                "closed: idle",
            ]
        )
    }

    @Test func switchingProtocolsIsRefused() {
        let transcript = Self.parseAllWays(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
        )
        #expect(transcript.lines == ["error upgrade_not_supported"])
        #expect(HTTPParserError.upgradeNotSupported.status == 502)
    }

    @Test(arguments: [
        ("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true),
        ("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", false),
        ("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false),
        ("HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n", true),
        ("HTTP/1.1 200 OK\r\n\r\n", false),
    ])
    func keepAlive(response: String, keepAlive: Bool) {
        let transcript = Self.parseAllWays(response, peerClosesAtEnd: false)
        #expect(transcript.lines.first?.contains("keepAlive=\(keepAlive)") == true, "\(transcript)")
    }

    @Test func missingReasonPhraseIsAccepted() {
        let transcript = Self.parseAllWays(
            "HTTP/1.1 404\r\nContent-Length: 0\r\n\r\nHTTP/1.1 500 \r\nContent-Length: 0\r\n\r\n",
            methods: ["GET", "GET"]
        )
        #expect(transcript.lines.filter { $0.hasPrefix("head") }.count == 2)
    }

    @Test(arguments: [
        ("HTTP/1.1 20 OK\r\n\r\n", "invalid_status_line"),
        ("HTTP/1.1 2000 OK\r\n\r\n", "invalid_status_line"),
        ("HTTP/1.1 600 Weird\r\n\r\n", "invalid_status_line"),
        ("HTTP/2 200 OK\r\n\r\n", "invalid_status_line"),
        ("HTTP/1.1  200 OK\r\n\r\n", "invalid_status_line"),
        ("http/1.1 200 OK\r\n\r\n", "invalid_status_line"),
        ("ICY 200 OK\r\n\r\n", "invalid_status_line"),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "duplicate_content_length"),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "content_length_with_transfer_encoding"
        ),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "unsupported_transfer_coding"),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "unsupported_transfer_coding"),
        ("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "invalid_transfer_encoding"),
        ("HTTP/1.1 200 OK\r\nX : y\r\n\r\n", "whitespace_before_colon"),
        ("HTTP/1.1 200 OK\r\nX: y\r\n z\r\n\r\n", "obsolete_line_folding"),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n", "invalid_chunk_size"),
        ("HTTP/1.1 200 O\u{01}K\r\n\r\n", "invalid_status_line"),
    ])
    func malformedResponsesAreRefused(response: String, code: String) {
        let transcript = Self.parseAllWays(response, peerClosesAtEnd: false)
        #expect(transcript.errorCode == code, "\(transcript)")
    }

    @Test func responseHeadOverTheLimitIsRefused() {
        let limits = HTTPParserLimits(maxHeaderBytes: 40)
        let transcript = Self.parseAllWays(
            "HTTP/1.1 200 OK\r\nX-Long: " + String(repeating: "x", count: 40) + "\r\n\r\n",
            peerClosesAtEnd: false,
            limits: limits
        )
        #expect(transcript.lines == ["error headers_too_large"])
    }

    @Test func responseFieldsWithUnderscoresAreKept() {
        let transcript = Self.parseAllWays("HTTP/1.1 204 No Content\r\nX_Upstream: 1\r\n\r\n", peerClosesAtEnd: false)
        #expect(transcript.lines.first?.hasSuffix("[X_Upstream: 1]") == true)
    }

    @Test func unannouncedResponsesAreReadAsAnswersToGet() {
        let transcript = Self.parseAllWays(
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
            methods: [],
            peerClosesAtEnd: false
        )
        #expect(transcript.bodies == ["x"])
    }

    @Test func isIdleTracksPendingRequests() {
        var parser = HTTPResponseParser()
        #expect(parser.isIdle)
        parser.expectResponse(toMethod: "GET")
        #expect(!parser.isIdle)
        Array("HTTP/1.1 204 No Content\r\n\r\n".utf8).withUnsafeBytes { buffer in
            let (event, consumed) = parser.next(buffer)
            #expect(consumed == buffer.count)
            if case .head? = event {} else { Issue.record("expected head") }
            if case .end? = parser.next(UnsafeRawBufferPointer(rebasing: buffer[consumed...])).event {
            } else {
                Issue.record("expected end")
            }
        }
        #expect(parser.isIdle)
        #expect(parser.peerClosed() == nil)
    }
}
