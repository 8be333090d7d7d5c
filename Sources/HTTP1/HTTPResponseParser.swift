/// How the body of a response is delimited on the wire.
public enum ResponseBodyFraming: Sendable, Hashable {
    /// No body: HEAD request, 204, 304 (1xx are reported as `.informational`).
    case none
    case contentLength(UInt64)
    case chunked
    /// No Content-Length and no Transfer-Encoding: the body ends when the upstream closes.
    case untilClose
}

public struct HTTPResponseInfo: Sendable, Hashable {
    public var framing: ResponseBodyFraming
    /// The upstream connection can carry another request after this response.
    public var isKeepAlive: Bool

    public init(framing: ResponseBodyFraming, isKeepAlive: Bool) {
        self.framing = framing
        self.isKeepAlive = isKeepAlive
    }
}

public enum HTTPResponseEvent: Sendable {
    /// The final response head.
    indirect case head(HTTPResponseHead, HTTPResponseInfo)
    /// The final response head as ranges of the buffer passed to this `next` call, instead of
    /// `.head`, when the parser's `deliversRawHeads` is set (the proxy copies fields from there).
    indirect case rawHead(HTTPRawResponseHead, HTTPResponseInfo)
    /// A 1xx response other than 101 (100 Continue, 103 Early Hints, ...); the final one follows.
    case informational(HTTPResponseHead)
    /// Body bytes: a range of indices into the buffer passed to this `next` call. Never empty.
    case body(Range<Int>)
    case end(trailers: HTTPHeaders?)
    case error(HTTPParserError)
}

/// A final response head that indexes the buffer it was parsed from (valid during the `next`
/// call's event only). Fields are validated as for `HTTPResponseHead`.
public struct HTTPRawResponseHead: Sendable {
    public var status: Int
    public var versionMinor: Int
    /// The reason phrase (possibly empty).
    public var reason: Range<Int>
    public var fields: [HTTPFieldRange]
    /// A Connection field lists a token other than `close` and `keep-alive` (a field to drop).
    public var connectionNamesFields: Bool

    public init(
        status: Int, versionMinor: Int, reason: Range<Int>, fields: [HTTPFieldRange], connectionNamesFields: Bool = true
    ) {
        self.status = status
        self.versionMinor = versionMinor
        self.reason = reason
        self.fields = fields
        self.connectionNamesFields = connectionNamesFields
    }

    /// The same head with strings (what `.head` carries).
    public func head(in buffer: UnsafeRawBufferPointer) -> HTTPResponseHead {
        HTTPResponseHead(
            status: self.status,
            reason: buffer.string(self.reason),
            versionMinor: self.versionMinor,
            // Values were checked to be ASCII or UTF-8: decoding repairs nothing.
            headers: HTTPHeaders(self.fields.map { (name: buffer.string($0.name), value: buffer.string($0.value)) })
        )
    }
}

/// Strict, incremental HTTP/1.1 response parser for upstream responses; same calling contract as
/// `HTTPRequestParser` (one event per call, `(nil, 0)` = need more bytes, failed for good after
/// `.error`). A 101 is refused unless it answers a request announced with
/// `expectResponse(toMethod:upgrade: true)`: the gateway forwards `Upgrade` only then, so any
/// other 101 is an upstream switching protocols nobody asked for.
public struct HTTPResponseParser: Sendable {
    private enum State: Sendable {
        case head
        case body(HTTPBodyDecoder)
        case endPending
        /// The peer closed after a complete message: nothing more can come.
        case closed
        /// A 101 answered an announced upgrade: the bytes after it are another protocol's, so
        /// nothing more is parsed.
        case switched
        case failed(HTTPParserError)
    }

    public var limits: HTTPParserLimits
    /// Final heads come as `.rawHead` (no strings made) instead of `.head`.
    public var deliversRawHeads = false
    private var state: State = .head
    /// Field ranges of the head being parsed, reused from one response to the next.
    private var rawFields: [HTTPFieldRange] = []
    private var scanner = HTTPBlockScanner()
    /// Requests sent and not yet answered by a final response, oldest first: bit i is set when
    /// request i was HEAD. Up to 64 pipelined requests.
    private var pendingHeadBits: UInt64 = 0
    /// Bit i is set when request i asked to upgrade (`expectResponse(toMethod:upgrade:)`).
    private var pendingUpgradeBits: UInt64 = 0
    private var pendingCount = 0
    /// The last `next` in the head state returned "need more" with bytes in the buffer.
    private var hasPartialHead = false

    public init(limits: HTTPParserLimits = .init()) {
        self.limits = limits
    }

    /// Must be called before each response with the method of the request it answers (HEAD → no
    /// body). Calls for pipelined requests queue up in order. Without a call, a response is read
    /// as the answer to a request that was not HEAD.
    public mutating func expectResponse(toMethod method: String) {
        self.expectResponse(toMethod: method, upgrade: false)
    }

    /// As `expectResponse(toMethod:)`; `upgrade`: the request asked to switch protocols, so a
    /// 101 may answer it. That 101 is then the final head (`.rawHead`/`.head`, framing `.none`,
    /// not keep-alive) and the parser consumes nothing after it: what follows is the new
    /// protocol's, for the caller to relay.
    public mutating func expectResponse(toMethod method: String, upgrade: Bool) {
        guard self.pendingCount < 64 else { return }
        if method == "HEAD" { self.pendingHeadBits |= UInt64(1) << UInt64(self.pendingCount) }
        if upgrade { self.pendingUpgradeBits |= UInt64(1) << UInt64(self.pendingCount) }
        self.pendingCount += 1
    }

    /// True when no response is in progress and none is awaited.
    public var isIdle: Bool {
        if case .head = self.state { return self.pendingCount == 0 && !self.hasPartialHead }
        return false
    }

    public mutating func next(_ buffer: UnsafeRawBufferPointer) -> (event: HTTPResponseEvent?, consumed: Int) {
        let result: (event: HTTPResponseEvent?, consumed: Int)
        switch self.state {
        case .failed(let error):
            return (.error(error), 0)
        case .closed, .switched:
            return (nil, 0)
        case .endPending:
            self.state = .head
            return (.end(trailers: nil), 0)
        case .head:
            result = self.parseHead(buffer)
            self.hasPartialHead = result.event == nil && !buffer.isEmpty
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
        if result.consumed > 0 { self.scanner.reset() }
        return result
    }

    /// The peer closed: completes an untilClose body (returns .end) or reports truncation (.error).
    /// Returns nil when the connection was idle (no response awaited, none started). Call it after
    /// `next` has returned `(nil, 0)` for the bytes still buffered.
    public mutating func peerClosed() -> HTTPResponseEvent? {
        switch self.state {
        case .failed, .closed, .switched:
            return nil
        case .endPending:
            self.state = .closed
            return .end(trailers: nil)
        case .body(let decoder):
            if case .untilClose = decoder.state {
                self.state = .closed
                return .end(trailers: nil)
            }
            self.state = .failed(.truncatedMessage)
            return .error(.truncatedMessage)
        case .head:
            if self.pendingCount == 0 && !self.hasPartialHead {
                self.state = .closed
                return nil
            }
            self.state = .failed(.truncatedMessage)
            return .error(.truncatedMessage)
        }
    }

    private mutating func fail(_ error: HTTPParserError) -> (event: HTTPResponseEvent?, consumed: Int) {
        self.state = .failed(error)
        return (.error(error), 0)
    }

    private mutating func parseHead(_ buffer: UnsafeRawBufferPointer) -> (event: HTTPResponseEvent?, consumed: Int) {
        let count = buffer.count
        let limit = self.limits.maxHeaderBytes
        let prefix: StaticString = "HTTP/"
        for index in 0..<min(count, 5) where buffer[index] != prefix.utf8Start[index] {
            return self.fail(.invalidStatusLine)
        }
        guard let statusLineEnd = buffer.indexOfLF(from: 0, to: min(count, limit)) else {
            return count >= limit ? self.fail(.headersTooLarge) : (nil, 0)
        }
        var lineEnd = statusLineEnd
        if lineEnd > 0, buffer[lineEnd - 1] == HTTPByte.cr { lineEnd -= 1 }
        let statusLine: StatusLine
        do {
            statusLine = try StatusLine(buffer, 0..<lineEnd)
        } catch {
            return self.fail(error)
        }
        guard let headEnd = self.scanner.findEnd(buffer, lineStart: statusLineEnd + 1) else {
            return count > limit ? self.fail(.headersTooLarge) : (nil, 0)
        }
        if headEnd > limit { return self.fail(.headersTooLarge) }

        var facts = HTTPHeadFacts()
        self.rawFields.removeAll(keepingCapacity: true)
        do {
            try HTTPFieldParser.parseRanges(
                buffer,
                from: statusLineEnd + 1,
                to: headEnd,
                maxCount: self.limits.maxHeaderCount,
                mode: .response,
                facts: &facts,
                into: &self.rawFields
            )
        } catch {
            return self.fail(error)
        }
        let status = statusLine.status
        let rawHead = HTTPRawResponseHead(
            status: status,
            versionMinor: statusLine.versionMinor,
            reason: statusLine.reason,
            fields: self.rawFields,
            connectionNamesFields: facts.connectionNamesFields
        )
        if status == 101 {
            guard self.pendingCount > 0 && self.pendingUpgradeBits & 1 == 1 else {
                return self.fail(.upgradeNotSupported)
            }
            self.pendingHeadBits >>= 1
            self.pendingUpgradeBits >>= 1
            self.pendingCount -= 1
            self.state = .switched
            let info = HTTPResponseInfo(framing: .none, isKeepAlive: false)
            if self.deliversRawHeads { return (.rawHead(rawHead, info), headEnd) }
            return (.head(rawHead.head(in: buffer), info), headEnd)
        }
        if status < 200 { return (.informational(rawHead.head(in: buffer)), headEnd) }

        // A final response answers the oldest pending request.
        let answersHead = self.pendingCount > 0 && self.pendingHeadBits & 1 == 1
        if self.pendingCount > 0 {
            self.pendingHeadBits >>= 1
            self.pendingUpgradeBits >>= 1
            self.pendingCount -= 1
        }

        let framing: ResponseBodyFraming
        if answersHead || status == 204 || status == 304 {
            framing = .none
        } else if facts.hasTransferEncoding {
            if facts.contentLength != nil { return self.fail(.contentLengthWithTransferEncoding) }
            if statusLine.versionMinor == 0 || facts.chunkedCount > 1 { return self.fail(.invalidTransferEncoding) }
            // Other codings would reach the client undeclared once Transfer-Encoding is re-framed.
            if !facts.lastCodingIsChunked || facts.codingCount > 1 { return self.fail(.unsupportedTransferCoding) }
            framing = .chunked
        } else if let length = facts.contentLength {
            if length > self.limits.maxBodyBytes { return self.fail(.bodyTooLarge) }
            framing = .contentLength(length)
        } else {
            framing = .untilClose
        }
        let connectionAllowsReuse =
            statusLine.versionMinor == 1
            ? !facts.connectionClose : (facts.connectionKeepAlive && !facts.connectionClose)
        let info = HTTPResponseInfo(framing: framing, isKeepAlive: framing != .untilClose && connectionAllowsReuse)
        switch framing {
        case .none, .contentLength(0):
            self.state = .endPending
        case .contentLength(let length):
            self.state = .body(HTTPBodyDecoder(state: .fixed(remaining: length)))
        case .chunked:
            self.state = .body(HTTPBodyDecoder(state: .chunkHeader(afterData: false)))
        case .untilClose:
            self.state = .body(HTTPBodyDecoder(state: .untilClose))
        }
        if self.deliversRawHeads { return (.rawHead(rawHead, info), headEnd) }
        return (.head(rawHead.head(in: buffer), info), headEnd)
    }
}

/// `HTTP/1.x SP 3DIGIT [SP reason-phrase]` (a missing reason is accepted, as nginx does).
private struct StatusLine {
    var versionMinor: Int
    var status: Int
    var reason: Range<Int>

    init(_ buffer: UnsafeRawBufferPointer, _ line: Range<Int>) throws(HTTPParserError) {
        let b = line.lowerBound
        guard line.count >= 12 else { throw .invalidStatusLine }
        do {
            self.versionMinor = try HTTPVersion.parseMinor(buffer, b..<(b + 8))
        } catch {
            throw .invalidStatusLine
        }
        guard buffer[b + 8] == HTTPByte.sp, buffer[b + 9] >= 0x31, buffer[b + 9] <= 0x35,
            HTTPByte.isDigit(buffer[b + 10]), HTTPByte.isDigit(buffer[b + 11])
        else { throw .invalidStatusLine }
        self.status = Int(buffer[b + 9] - 0x30) * 100 + Int(buffer[b + 10] - 0x30) * 10 + Int(buffer[b + 11] - 0x30)
        if line.count == 12 {
            self.reason = line.upperBound..<line.upperBound
            return
        }
        guard buffer[b + 12] == HTTPByte.sp else { throw .invalidStatusLine }
        self.reason = (b + 13)..<line.upperBound
        for index in self.reason {
            let byte = buffer[index]
            if byte == HTTPByte.htab || byte >= 0x20 && byte != 0x7F { continue }
            throw byte == HTTPByte.cr ? .bareCarriageReturn : .invalidStatusLine
        }
    }
}
