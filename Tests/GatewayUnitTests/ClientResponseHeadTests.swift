import GatewayTesting
import Testing

@testable import GatewayIO
@testable import HTTP1
@testable import HTTPProxy

/// `ClientResponsePlan.writeHead` (the proxy's path: bytes copied from the upstream's head) must
/// write exactly what `ClientResponsePlan.make` + `HTTPSerializer.writeResponseHead` write.
@Suite struct ClientResponseHeadTests {
    static let heads: [String] = [
        // What the benchmark's nginx upstream sends.
        "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 22 Nov 2026 03:00:00 GMT\r\n"
            + "Content-Type: text/plain\r\nContent-Length: 100\r\nConnection: keep-alive\r\n\r\n",
        "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nTrailer: Server-Timing\r\nKeep-Alive: timeout=5\r\n"
            + "Upgrade: h2c\r\nProxy-Connection: keep-alive\r\nTE: trailers\r\nProxy-Authenticate: Basic\r\n\r\n",
        "HTTP/1.1 200 OK\r\nConnection: x-custom, close, FOO\r\nX-Custom: 1\r\nfoo: 2\r\nX-Kept: 3\r\nContent-Length: 2\r\n\r\n",
        "HTTP/1.1 200 OK\r\nConnection: Keep-Alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 7\r\n\r\n",
        "HTTP/1.1 200 OK\r\nConnection: ,, x-a ,\tx-b\t,keep-alive\r\nx-A: 1\r\nX-B: 2\r\nX-C: 3\r\nContent-Length: 1\r\n\r\n",
        "HTTP/1.1 200\r\nContent-Length: 3\r\n\r\n",
        "HTTP/1.1 299 \r\nContent-Length: 3\r\n\r\n",
        "HTTP/1.1 404 Not Here\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 Ünïcode reason\r\nX-Name: café\r\nContent-Length: 1\r\n\r\n",
        "HTTP/1.1 304 Not Modified\r\ncontent-length: 1234\r\nETag: \"x\"\r\n\r\n",
        "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nX-A: b\r\n\r\n",
        "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n",
        "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\n",
        "HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nX-Empty:\r\nX-Spaces:   padded\t \r\nContent-Length: 4\r\n\r\n",
        "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 12\r\nConnection: close\r\n\r\n",
        // The upstream echoes a request ID (or sends its own): the gateway's replaces it.
        "HTTP/1.1 200 OK\r\nX-Request-Id: upstream-1\r\nx-request-id: upstream-2\r\nContent-Length: 1\r\n\r\n",
        "HTTP/1.1 200 OK\r\n"
            + (0..<40).map { "X-Field-\($0): \(String(repeating: "v", count: $0 * 7))\r\n" }.joined()
            + "Content-Length: 9\r\n\r\n",
    ]

    /// Plus a reason with a byte that is not UTF-8 (the String path repairs it).
    static let cases: [[UInt8]] =
        Self.heads.map { Array($0.utf8) }
        + [Array("HTTP/1.1 200 bad ".utf8) + [0xFF] + Array("\r\nContent-Length: 1\r\n\r\n".utf8)]

    @Test(arguments: Self.cases.indices)
    func writeHeadMatchesThePlan(index: Int) {
        let text = Self.cases[index]
        for method in ["GET", "HEAD"] {
            var parser = HTTPResponseParser()
            parser.deliversRawHeads = true
            parser.expectResponse(toMethod: method)
            text.withUnsafeBytes { buffer in
                let (event, consumed) = parser.next(buffer)
                guard case .rawHead(let raw, let info)? = event else {
                    Issue.record("head \(index): \(String(describing: event))")
                    return
                }
                #expect(consumed == buffer.count)
                let head = raw.head(in: buffer)
                let requestIDs: [RequestID?] = [
                    nil, RequestID(high: 0xfeed, low: 42), RequestID(accepting: "lb-7f3a:1"),
                ]
                for clientVersionMinor in [0, 1] {
                    for keepAlive in [true, false] {
                        for requestID in requestIDs {
                            let plan = ClientResponsePlan.make(
                                upstreamHead: head, framing: info.framing, requestMethod: method,
                                clientVersionMinor: clientVersionMinor, keepAlive: keepAlive, requestID: requestID?.text
                            )
                            var expected: [UInt8] = [1, 2, 3]
                            HTTPSerializer.writeResponseHead(plan.head, into: &expected)
                            // Bytes already queued stay in front; a small buffer must grow.
                            let output = IOBuffer(capacity: 64)
                            output.append([1, 2, 3])
                            let (encoding, closeAfter) = ClientResponsePlan.writeHead(
                                raw, in: buffer, framing: info.framing, requestMethod: method,
                                clientVersionMinor: clientVersionMinor, keepAlive: keepAlive, requestID: requestID,
                                into: output)
                            let written = Array(output.readableBytes)
                            let got = String(decoding: written, as: UTF8.self)
                            let want = String(decoding: expected, as: UTF8.self)
                            #expect(
                                written == expected,
                                "head \(index) \(method) 1.\(clientVersionMinor) keepAlive=\(keepAlive):\n\(got)\nwant:\n\(want)"
                            )
                            #expect(encoding == plan.encoding)
                            #expect(closeAfter == plan.closeAfter)
                            if let requestID {
                                #expect(got.contains("\r\nX-Request-Id: \(requestID.text)\r\n"))
                                #expect(!got.contains("upstream-"))
                            }
                        }
                    }
                }
            }
        }
    }

    @Test func connectionOptionsNameFieldsCaseInsensitively() {
        let text = Array("Connection: X-One, close\r\nConnection: x-two\r\nx-one: a\r\nX-TWO: b\r\nX-Three: c\r\n".utf8)
        text.withUnsafeBytes { buffer in
            var facts = HTTPHeadFacts()
            var fields: [HTTPFieldRange] = []
            #expect(throws: Never.self) {
                try HTTPFieldParser.parseRanges(
                    buffer, from: 0, to: buffer.count, maxCount: 100, mode: .response, facts: &facts, into: &fields)
            }
            let options = HeaderRewriting.ConnectionOptions(fields, in: buffer)
            #expect(fields.map { options.names(buffer, $0.name) } == [false, false, true, true, false])
            #expect(facts.connectionClose)
        }
    }

    @Test func writerStopsAtItsBoundInsteadOfOverrunning() {
        // The bound is a precondition: a writer that fits writes exactly its bytes.
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: 40, alignment: 1)
        defer { memory.deallocate() }
        var writer = HeadWriter(memory)
        writer.write("Content-Length: ")
        writer.writeDecimal(18_446_744_073_709_551_615)
        #expect(writer.count == 36)
        #expect(
            Array(UnsafeRawBufferPointer(rebasing: memory[0..<writer.count]))
                == Array("Content-Length: 18446744073709551615".utf8))
    }

    /// Random upstream heads (those the parser accepts) against the plan, for every request
    /// method, client version and keep-alive choice.
    @Test func randomHeadsMatchThePlan() {
        let names = [
            "Connection", "connection", "Keep-Alive", "Content-Length", "Transfer-Encoding", "TE", "Trailer", "Upgrade",
            "Proxy-Authenticate", "X-A", "x-b", "Server", "Date", "Set-Cookie", "Content-Type", "X-Request-Id",
            "x-request-id",
        ]
        let values = [
            "", "close", "keep-alive", "x-a", "X-A, x-b, close", "chunked", "0", "17", "gzip, chunked", "caf\u{E9}",
            String(repeating: "v", count: 300), "a b\tc",
        ]
        let statusLines = [
            "HTTP/1.1 200 OK", "HTTP/1.1 204 No Content", "HTTP/1.1 304 Not Modified", "HTTP/1.0 200 OK",
            "HTTP/1.1 404", "HTTP/1.1 500 Boom \u{E9}",
        ]
        var random = SplitMix64(state: 77)
        var compared = 0
        for iteration in 0..<600 {
            var text = statusLines.randomElement(using: &random)! + "\r\n"
            for _ in 0..<Int.random(in: 0...8, using: &random) {
                text += names.randomElement(using: &random)! + ": " + values.randomElement(using: &random)! + "\r\n"
            }
            text += "\r\n"
            let bytes = Array(text.utf8)
            let method = Bool.random(using: &random) ? "GET" : "HEAD"
            var parser = HTTPResponseParser()
            parser.deliversRawHeads = true
            parser.expectResponse(toMethod: method)
            bytes.withUnsafeBytes { buffer in
                guard case .rawHead(let raw, let info)? = parser.next(buffer).event else { return }
                compared += 1
                let head = raw.head(in: buffer)
                let clientVersionMinor = Int.random(in: 0...1, using: &random)
                let keepAlive = Bool.random(using: &random)
                let requestID: RequestID? =
                    Bool.random(using: &random) ? RequestID(high: UInt64(iteration), low: 9) : nil
                let plan = ClientResponsePlan.make(
                    upstreamHead: head, framing: info.framing, requestMethod: method,
                    clientVersionMinor: clientVersionMinor, keepAlive: keepAlive, requestID: requestID?.text)
                var expected: [UInt8] = []
                HTTPSerializer.writeResponseHead(plan.head, into: &expected)
                let output = IOBuffer(capacity: 64)
                let (encoding, closeAfter) = ClientResponsePlan.writeHead(
                    raw, in: buffer, framing: info.framing, requestMethod: method,
                    clientVersionMinor: clientVersionMinor, keepAlive: keepAlive, requestID: requestID, into: output)
                #expect(Array(output.readableBytes) == expected, "iteration \(iteration): \(text)")
                #expect(encoding == plan.encoding && closeAfter == plan.closeAfter)
            }
        }
        // Enough of them are valid heads for the comparison to mean something.
        #expect(compared > 150)
    }
}
