import HTTP1

/// Reads one HTTP/1.1 response to a request of the outbound client from the bytes the transport
/// delivers, in any split, through the project's `HTTPResponseParser`.
///
/// Bounded: the head by the parser's limits, the body by `maximumBodyBytes` (Apple's answers
/// are at most a receipt; Google's status list is larger). A framing error, an oversized body
/// or a truncated response is `malformed_answer` (`apple_malformed_answer`,
/// `google_malformed_answer`); the connection must then be closed, not reused.
///
/// Usage (one per connection; one request in flight): `expectResponse()` before sending,
/// `feed` each read until it returns a response, `peerClosed()` when the read gives EOF.
package struct OutboundResponseReader: Sendable {
    /// Largest body kept (a base64 receipt is well under it).
    package static let defaultMaximumBodyBytes = 128 * 1024

    package var maximumBodyBytes: Int
    /// Whom the answers come from (the errors' codes name it).
    package let peer: OutboundPeer
    private var parser = HTTPResponseParser()
    private var buffered: [UInt8] = []
    private var head: HTTPResponseHead?
    private var isKeepAlive = true
    private var body: [UInt8] = []
    /// Bytes of the awaited answer seen yet: a close before the first one is "no answer".
    private var hasAnswerBytes = false

    package init(peer: OutboundPeer, maximumBodyBytes: Int = Self.defaultMaximumBodyBytes) {
        self.peer = peer
        self.maximumBodyBytes = maximumBodyBytes
    }

    /// Must precede each request (`method` is the request's: an answer to `GET` or `POST`
    /// has a body).
    package mutating func expectResponse(toMethod method: String = "POST") {
        self.parser.expectResponse(toMethod: method)
        self.hasAnswerBytes = !self.buffered.isEmpty
    }

    /// Consumes `bytes`; returns the response once it is complete, nil while more is needed.
    /// Bytes after a complete response stay buffered for the next one (a server never sends any
    /// unasked, so a caller may treat leftovers as a reason to close).
    package mutating func feed(_ bytes: [UInt8]) throws(OutboundHTTPError) -> OutboundHTTPResponse? {
        self.buffered.append(contentsOf: bytes)
        if !bytes.isEmpty { self.hasAnswerBytes = true }
        while true {
            let (event, consumed) = self.buffered.withUnsafeBytes { self.parser.next($0) }
            var bodyRange: Range<Int>?
            if case .body(let range) = event { bodyRange = range }
            if let bodyRange {
                guard self.body.count + bodyRange.count <= self.maximumBodyBytes else {
                    throw OutboundHTTPError(
                        .malformedAnswer, peer: self.peer, status: self.head?.status,
                        "answer body exceeds \(self.maximumBodyBytes) bytes")
                }
                self.body.append(contentsOf: self.buffered[bodyRange])
            }
            if consumed > 0 { self.buffered.removeFirst(consumed) }
            guard let event else {
                if consumed == 0 { return nil }
                continue
            }
            if let response = try self.handle(event) { return response }
        }
    }

    /// The peer closed the connection: completes a body framed by the close; nil when it closed
    /// before the first byte of an answer (or none was awaited): no answer, which the client
    /// reports as `<peer>_unreachable`; a truncation error when it closed mid-answer.
    package mutating func peerClosed() throws(OutboundHTTPError) -> OutboundHTTPResponse? {
        if !self.hasAnswerBytes && self.head == nil { return nil }
        guard let event = self.parser.peerClosed() else { return nil }
        return try self.handle(event)
    }

    private mutating func handle(_ event: HTTPResponseEvent) throws(OutboundHTTPError) -> OutboundHTTPResponse? {
        switch event {
        case .head(let head, let info):
            self.head = head
            self.isKeepAlive = info.isKeepAlive
            self.body = []
            return nil
        case .rawHead:
            // `deliversRawHeads` is never set here.
            return nil
        case .informational, .body:
            return nil
        case .end:
            guard let head = self.head else {
                throw OutboundHTTPError(.malformedAnswer, peer: self.peer, "answer ended before its head")
            }
            self.head = nil
            let response = OutboundHTTPResponse(
                status: head.status, headers: head.headers, body: self.body, isKeepAlive: self.isKeepAlive)
            self.body = []
            return response
        case .error(let error):
            throw OutboundHTTPError(
                .malformedAnswer, peer: self.peer, status: self.head?.status, "answer is not valid HTTP/1.1: \(error)")
        }
    }
}
