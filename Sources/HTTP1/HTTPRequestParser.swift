/// How the body of a request is delimited on the wire.
public enum RequestBodyFraming: Sendable, Hashable {
    /// No body (neither Content-Length nor Transfer-Encoding).
    case none
    /// Exactly this many bytes (possibly 0: `Content-Length: 0` is kept so the upstream sees it).
    case contentLength(UInt64)
    /// `Transfer-Encoding: chunked`.
    case chunked
}

/// What the parser decided about a request from its head.
public struct HTTPRequestInfo: Sendable, Hashable {
    public var framing: RequestBodyFraming
    /// HTTP/1.1 without `Connection: close`, or HTTP/1.0 with `Connection: keep-alive` (and no close).
    public var isKeepAlive: Bool
    /// HTTP/1.1 with `Expect: 100-continue`: the client waits for `100 Continue` before the body.
    public var expectsContinue: Bool

    public init(framing: RequestBodyFraming, isKeepAlive: Bool, expectsContinue: Bool) {
        self.framing = framing
        self.isKeepAlive = isKeepAlive
        self.expectsContinue = expectsContinue
    }
}

public enum HTTPRequestEvent: Sendable {
    /// A complete request head. For absolute-form targets, `head.target` is already rewritten to
    /// origin-form and Host holds the target's authority (RFC 9112 §3.2.2).
    case head(HTTPRequestHead, HTTPRequestInfo)
    /// Body bytes: a range of indices into the buffer passed to this `next` call. Never empty.
    case body(Range<Int>)
    /// The request is complete. `trailers` are those of a chunked body, nil when there were none.
    case end(trailers: HTTPHeaders?)
    case error(HTTPParserError)
}

/// Strict, incremental HTTP/1.1 request parser: a value-type state machine with no I/O.
///
/// Feed it the bytes received so far; it returns one event at a time and how many bytes of the
/// buffer that event used. The caller drops the consumed bytes, keeps the rest, appends new
/// data and calls again. Call `next` until it returns `(nil, 0)` (need more bytes): `.end` of a
/// body-less request and `.end` after the last body bytes come on their own call, with 0 bytes
/// consumed. Any split of the input into buffers gives the same events (tested byte by byte
/// and in random splits, and fuzzed).
///
/// After `.error` the parser stays failed: every later call returns the same error, consuming
/// nothing; the connection answers `error.status` with `Connection: close` and closes. After
/// `.end` the next call starts the next request (pipelining).
public struct HTTPRequestParser: Sendable {
    package enum State: Sendable {
        case head
        case body(HTTPBodyDecoder)
        case endPending
        case failed(HTTPParserError)
    }

    /// May be changed between calls, e.g. `maxBodyBytes` once the route of a head is known
    /// (it then applies to chunked data still to come; a Content-Length is the caller's to check).
    public var limits: HTTPParserLimits
    /// Where the parser stands (read by the tests, in GatewayTesting).
    package private(set) var state: State = .head
    private var scanner = HTTPBlockScanner()
    /// What is known about the head being received, so that a slow feed (a byte at a time) does
    /// not make the parser redo it on every call. Reset whenever bytes are consumed.
    private var memo = HeadMemo()
    /// When the head failed after its request line parsed (a header, the framing, the size):
    /// that line's method and the target's path, both already checked (a method token; a target
    /// of visible ASCII), so the refusal can be logged with them. nil otherwise.
    package private(set) var refusedRequestLine: (method: String, path: String)?

    public init(limits: HTTPParserLimits = .init()) {
        self.limits = limits
    }

    /// Parses from the start of `buffer` and returns at most one event plus the number of bytes
    /// consumed from `buffer`. `event == nil` with `consumed == 0` means "need more bytes": the
    /// caller keeps the unconsumed bytes and calls again with them plus new data (this is the only
    /// case with a nil event). `.body(range)` ranges index `buffer`.
    public mutating func next(_ buffer: UnsafeRawBufferPointer) -> (event: HTTPRequestEvent?, consumed: Int) {
        let result: (event: HTTPRequestEvent?, consumed: Int)
        switch self.state {
        case .failed(let error):
            return (.error(error), 0)
        case .endPending:
            self.state = .head
            return (.end(trailers: nil), 0)
        case .head:
            result = self.parseHead(buffer)
        case .body(var decoder):
            switch decoder.next(buffer, limits: self.limits, scanner: &self.scanner) {
            case .needMore:
                self.state = .body(decoder)
                result = (nil, 0)
            case .body(let range, let consumed, let finished):
                self.state = finished ? .endPending : .body(decoder)
                result = (.body(range), consumed)
            case .end(let trailers, let consumed):
                self.state = .head
                result = (.end(trailers: trailers), consumed)
            case .error(let error):
                self.state = .failed(error)
                result = (.error(error), 0)
            }
        }
        if result.consumed > 0 {
            self.scanner.reset()
            self.memo = HeadMemo()
        }
        return result
    }

    private mutating func fail(_ error: HTTPParserError) -> (event: HTTPRequestEvent?, consumed: Int) {
        self.state = .failed(error)
        return (.error(error), 0)
    }

    private mutating func parseHead(_ buffer: UnsafeRawBufferPointer) -> (event: HTTPRequestEvent?, consumed: Int) {
        let count = buffer.count
        let limit = self.limits.maxHeaderBytes

        // Empty lines before a request line are ignored (RFC 9112 §2.2; nginx does the same), within
        // the limit. No check below looks at bytes past the limit: a split feed sees no more than
        // `limit` bytes before it must decide, so the whole buffer must not decide on more either.
        var start = self.memo.start
        let visible = min(count, limit)
        while start < visible {
            let byte = buffer[start]
            if byte == HTTPByte.lf {
                start += 1
            } else if byte == HTTPByte.cr {
                // The byte after a CR at the limit's last position is past the limit.
                if start + 1 >= visible { break }
                guard buffer[start + 1] == HTTPByte.lf else { return self.fail(.bareCarriageReturn) }
                start += 2
            } else {
                break
            }
        }
        self.memo.start = start

        if start >= limit { return self.fail(.requestLineTooLong) }

        let requestLineEnd: Int
        let requestLine: RequestLine
        if let known = self.memo.requestLine {
            (requestLineEnd, requestLine) = known
        } else {
            // Refuse garbage (TLS on the plain port, binary) without waiting for a line end.
            var index = start
            let methodCheckEnd = min(count, start + 32, limit)
            while index < methodCheckEnd {
                let byte = buffer[index]
                if byte == HTTPByte.sp || byte == HTTPByte.cr || byte == HTTPByte.lf { break }
                if !HTTPByte.isMethodByte(byte) { return self.fail(.invalidMethod) }
                index += 1
            }
            if start < count, buffer[start] == HTTPByte.sp { return self.fail(.invalidMethod) }

            // The request line must end within the limit, else 414.
            let searchFrom = max(start, self.memo.searchedForLineEnd)
            guard let lf = buffer.indexOfLF(from: searchFrom, to: min(count, limit)) else {
                self.memo.searchedForLineEnd = min(count, limit)
                return count >= limit ? self.fail(.requestLineTooLong) : (nil, 0)
            }
            var lineEnd = lf
            if lineEnd > start, buffer[lineEnd - 1] == HTTPByte.cr { lineEnd -= 1 }
            do {
                requestLine = try RequestLine(buffer, start..<lineEnd)
            } catch {
                return self.fail(error)
            }
            requestLineEnd = lf
            self.memo.requestLine = (lf, requestLine)
        }

        guard let headEnd = self.scanner.findEnd(buffer, lineStart: requestLineEnd + 1) else {
            guard count > limit else { return (nil, 0) }
            self.noteRefusedRequestLine(buffer, requestLine)
            return self.fail(.headersTooLarge)
        }
        if headEnd > limit {
            self.noteRefusedRequestLine(buffer, requestLine)
            return self.fail(.headersTooLarge)
        }

        do {
            let (head, info) = try self.makeHead(buffer, requestLine, fieldsFrom: requestLineEnd + 1, to: headEnd)
            switch info.framing {
            case .none, .contentLength(0):
                self.state = .endPending
            case .contentLength(let length):
                self.state = .body(HTTPBodyDecoder(state: .fixed(remaining: length)))
            case .chunked:
                self.state = .body(
                    HTTPBodyDecoder(
                        state: .chunkHeader(afterData: false),
                        dropsUnderscoreNames: self.limits.dropsUnderscoreFieldNames
                    )
                )
            }
            return (.head(head, info), headEnd)
        } catch {
            self.noteRefusedRequestLine(buffer, requestLine)
            return self.fail(error)
        }
    }

    /// Failure paths only: the one allocation is for the log line of a refused request.
    private mutating func noteRefusedRequestLine(_ buffer: UnsafeRawBufferPointer, _ requestLine: RequestLine) {
        let target = buffer.string(
            requestLine.absoluteAuthority == nil ? requestLine.target : requestLine.absolutePath)
        let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        self.refusedRequestLine = (buffer.string(requestLine.method), path.isEmpty ? "/" : String(path))
    }

    private func makeHead(
        _ buffer: UnsafeRawBufferPointer,
        _ requestLine: RequestLine,
        fieldsFrom start: Int,
        to end: Int
    ) throws(HTTPParserError) -> (HTTPRequestHead, HTTPRequestInfo) {
        var facts = HTTPHeadFacts()
        var fields = try HTTPFieldParser.parse(
            buffer,
            from: start,
            to: end,
            maxCount: self.limits.maxHeaderCount,
            mode: .request,
            dropsUnderscoreNames: self.limits.dropsUnderscoreFieldNames,
            facts: &facts
        )
        let minor = requestLine.versionMinor
        if minor == 1 && facts.hostCount == 0 { throw .missingHost }

        let target: String
        if let authority = requestLine.absoluteAuthority {
            // Absolute-form: the target's authority replaces Host (RFC 9112 §3.2.2, as nginx).
            let host = buffer.string(authority)
            if facts.hostFieldIndex >= 0 {
                fields[facts.hostFieldIndex].value = host
            } else {
                fields.append(HTTPField(name: "Host", value: host))
            }
            let path = requestLine.absolutePath
            if path.isEmpty {
                target = "/"
            } else if buffer[path.lowerBound] == UInt8(ascii: "?") {
                target = "/" + buffer.string(path)
            } else {
                target = buffer.string(path)
            }
        } else {
            target = buffer.string(requestLine.target)
        }

        let framing: RequestBodyFraming
        if facts.hasTransferEncoding {
            if facts.contentLength != nil { throw .contentLengthWithTransferEncoding }
            if minor == 0 { throw .invalidTransferEncoding }
            if facts.chunkedCount > 1 { throw .invalidTransferEncoding }
            if !facts.lastCodingIsChunked {
                throw facts.lastCodingIsKnown ? .invalidTransferEncoding : .unsupportedTransferCoding
            }
            if facts.codingCount > 1 { throw .unsupportedTransferCoding }
            framing = .chunked
        } else if let length = facts.contentLength {
            if length > self.limits.maxBodyBytes { throw .bodyTooLarge }
            framing = .contentLength(length)
        } else {
            framing = .none
        }

        let isKeepAlive = minor == 1 ? !facts.connectionClose : (facts.connectionKeepAlive && !facts.connectionClose)
        let head = HTTPRequestHead(
            method: buffer.string(requestLine.method),
            target: target,
            versionMinor: minor,
            headers: HTTPHeaders(fields)
        )
        let info = HTTPRequestInfo(
            framing: framing,
            isKeepAlive: isKeepAlive,
            expectsContinue: minor == 1 && facts.expectsContinue
        )
        return (head, info)
    }
}

/// Progress on a head that is not complete yet (indices into the caller's buffer, which starts
/// with the same unconsumed bytes on every call).
private struct HeadMemo {
    /// End of the leading empty lines seen so far.
    var start = 0
    /// No LF before this index (request line end search).
    var searchedForLineEnd = 0
    /// The validated request line and the index of its LF.
    var requestLine: (end: Int, line: RequestLine)?
}

/// The three parts of a request line, as ranges of the buffer.
private struct RequestLine {
    var method: Range<Int>
    var target: Range<Int>
    var versionMinor: Int
    /// Absolute-form only: the authority and the path-and-query after it (possibly empty).
    var absoluteAuthority: Range<Int>?
    var absolutePath: Range<Int> = 0..<0

    /// `method SP request-target SP HTTP-version`, single spaces (RFC 9112 §3; no whitespace
    /// autocorrection). Targets: origin-form, or absolute-form with http/https.
    init(_ buffer: UnsafeRawBufferPointer, _ line: Range<Int>) throws(HTTPParserError) {
        var index = line.lowerBound
        while index < line.upperBound, buffer[index] != HTTPByte.sp {
            if !HTTPByte.isMethodByte(buffer[index]) { throw .invalidMethod }
            index += 1
        }
        self.method = line.lowerBound..<index
        if self.method.isEmpty { throw .invalidMethod }
        if index == line.upperBound { throw .invalidRequestLine }
        if Self.isExactly(buffer, self.method, "CONNECT") {
            throw .connectNotSupported
        }

        let targetStart = index + 1
        index = targetStart
        while index < line.upperBound, buffer[index] != HTTPByte.sp {
            let byte = buffer[index]
            if byte <= 0x20 || byte >= 0x7F {
                throw byte == HTTPByte.cr ? .bareCarriageReturn : .invalidRequestTarget
            }
            index += 1
        }
        self.target = targetStart..<index
        if self.target.isEmpty { throw .invalidRequestLine }
        if index == line.upperBound { throw .http09NotSupported }

        let version = (index + 1)..<line.upperBound
        self.versionMinor = try HTTPVersion.parseMinor(buffer, version)

        if buffer[targetStart] == UInt8(ascii: "/") {
            self.absoluteAuthority = nil
        } else {
            let (authority, path) = try Self.parseAbsoluteForm(buffer, self.target)
            self.absoluteAuthority = authority
            self.absolutePath = path
        }
    }

    private static func isExactly(_ buffer: UnsafeRawBufferPointer, _ range: Range<Int>, _ literal: StaticString)
        -> Bool
    {
        guard range.count == literal.utf8CodeUnitCount else { return false }
        return zip(range, UnsafeBufferPointer(start: literal.utf8Start, count: range.count)).allSatisfy {
            buffer[$0.0] == $0.1
        }
    }

    /// `http://authority[/path][?query]` (scheme case-insensitive, no userinfo).
    static func parseAbsoluteForm(
        _ buffer: UnsafeRawBufferPointer,
        _ target: Range<Int>
    ) throws(HTTPParserError) -> (authority: Range<Int>, path: Range<Int>) {
        var index = target.lowerBound
        while index < target.upperBound, buffer[index] != UInt8(ascii: ":") { index += 1 }
        let scheme = target.lowerBound..<index
        guard buffer.equalsLowercase(scheme, "http") || buffer.equalsLowercase(scheme, "https") else {
            throw .invalidRequestTarget  // authority-form, asterisk-form, other schemes
        }
        guard target.upperBound - index >= 3, buffer[index + 1] == UInt8(ascii: "/"),
            buffer[index + 2] == UInt8(ascii: "/")
        else { throw .invalidRequestTarget }
        let authorityStart = index + 3
        index = authorityStart
        while index < target.upperBound, buffer[index] != UInt8(ascii: "/"), buffer[index] != UInt8(ascii: "?") {
            index += 1
        }
        let authority = authorityStart..<index
        do {
            try HTTPHeadFacts.validateAuthority(buffer, authority)
        } catch {
            throw .invalidRequestTarget
        }
        return (authority, index..<target.upperBound)
    }
}
