import HTTP1
import Testing

@testable import OutboundHTTP

/// The outbound client's answer reader (`OutboundResponseReader`), without sockets.
@Suite struct OutboundResponseReaderTests {
    static let peer = OutboundPeer(name: "test", displayName: "Test")

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func readerAssemblesAnswersFromAnySplit() throws {
        let body = "Failed to find bit state"
        let wire = Self.bytes(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        for cut in [1, 2, 7, wire.count] {
            var reader = OutboundResponseReader(peer: Self.peer)
            reader.expectResponse()
            var response: OutboundHTTPResponse?
            var offset = 0
            while offset < wire.count {
                let end = min(offset + cut, wire.count)
                if let done = try reader.feed(Array(wire[offset..<end])) { response = done }
                offset = end
            }
            let got = try #require(response, "cut \(cut)")
            #expect(got.status == 200 && got.isKeepAlive)
            #expect(got.body == Self.bytes(body))
        }
    }

    @Test func readerHandlesChunkedCloseDelimitedAndRetryAfter() throws {
        var reader = OutboundResponseReader(peer: Self.peer)
        reader.expectResponse()
        let chunked = try reader.feed(
            Self.bytes(
                "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 120\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            ))
        let response = try #require(chunked)
        #expect(response.status == 429 && response.body == Self.bytes("abc"))
        #expect(response.retryAfter == .seconds(120))

        var closing = OutboundResponseReader(peer: Self.peer)
        closing.expectResponse()
        #expect(try closing.feed(Self.bytes("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nQUJD")) == nil)
        let closed = try #require(try closing.peerClosed())
        #expect(closed.body == Self.bytes("QUJD") && !closed.isKeepAlive)
        #expect(
            OutboundHTTPResponse(
                status: 503, headers: HTTPHeaders([("Retry-After", "Wed, 21 Oct 2026 07:28:00 GMT")]), body: [],
                isKeepAlive: true
            ).retryAfter == nil)
    }

    @Test func readerRefusesOversizedTruncatedAndInvalidAnswers() throws {
        var small = OutboundResponseReader(peer: Self.peer, maximumBodyBytes: 8)
        small.expectResponse()
        #expect(throws: OutboundHTTPError(.malformedAnswer, peer: Self.peer, "")) {
            try small.feed(Self.bytes("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n123456789"))
        }
        var truncated = OutboundResponseReader(peer: Self.peer)
        truncated.expectResponse()
        #expect(try truncated.feed(Self.bytes("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n1234")) == nil)
        #expect(throws: OutboundHTTPError(.malformedAnswer, peer: Self.peer, "")) { try truncated.peerClosed() }
        var silent = OutboundResponseReader(peer: Self.peer)
        silent.expectResponse()
        #expect(try silent.feed([]) == nil)
        #expect(try silent.peerClosed() == nil, "closed before any answer byte: no answer, not a malformed one")
        var garbage = OutboundResponseReader(peer: Self.peer)
        garbage.expectResponse()
        #expect(throws: OutboundHTTPError(.malformedAnswer, peer: Self.peer, "")) {
            try garbage.feed(Self.bytes("SMTP ready\r\n\r\n"))
        }
    }
}
