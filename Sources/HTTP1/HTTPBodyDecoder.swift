/// The body half of a message: Content-Length, chunked (with extensions and trailers) or
/// close-delimited. Shared by the request and response parsers; a value type with no I/O.
package struct HTTPBodyDecoder: Sendable {
    enum State: Sendable, Hashable {
        /// Exactly this many body bytes remain.
        case fixed(remaining: UInt64)
        /// At a chunk-size line; `afterData` when the CRLF that ends chunk data comes first.
        case chunkHeader(afterData: Bool)
        /// Inside chunk data.
        case chunkData(remaining: UInt64)
        /// Everything until the peer closes (responses only).
        case untilClose
    }

    enum Step {
        case needMore
        /// Body bytes `range` of the buffer; `consumed` counts them and any framing before them.
        case body(Range<Int>, consumed: Int, finished: Bool)
        case end(trailers: HTTPHeaders?, consumed: Int)
        case error(HTTPParserError)
    }

    /// Size digits allowed on a chunk-size line, leading zeros included.
    static let maxSizeDigits = 32

    var state: State
    /// Chunked: data bytes seen so far, for `maxBodyBytes`.
    private var chunkedTotal: UInt64 = 0

    /// Trailer fields with `_` in their name are dropped (requests; see `HTTPParserLimits`).
    private let dropsUnderscoreNames: Bool

    init(state: State, dropsUnderscoreNames: Bool = false) {
        self.state = state
        self.dropsUnderscoreNames = dropsUnderscoreNames
    }

    /// One step over `buffer`. Never returns `.body` with an empty range.
    mutating func next(
        _ buffer: UnsafeRawBufferPointer,
        limits: HTTPParserLimits,
        scanner: inout HTTPBlockScanner
    ) -> Step {
        switch self.state {
        case .fixed(let remaining):
            if buffer.isEmpty { return .needMore }
            let take = Int(min(UInt64(buffer.count), remaining))
            let left = remaining - UInt64(take)
            self.state = .fixed(remaining: left)
            return .body(0..<take, consumed: take, finished: left == 0)

        case .chunkData(let remaining):
            if buffer.isEmpty { return .needMore }
            let take = Int(min(UInt64(buffer.count), remaining))
            let left = remaining - UInt64(take)
            self.state = left == 0 ? .chunkHeader(afterData: true) : .chunkData(remaining: left)
            return .body(0..<take, consumed: take, finished: false)

        case .untilClose:
            if buffer.isEmpty { return .needMore }
            return .body(0..<buffer.count, consumed: buffer.count, finished: false)

        case .chunkHeader(let afterData):
            return self.chunkHeader(buffer, afterData: afterData, limits: limits, scanner: &scanner)
        }
    }

    private mutating func chunkHeader(
        _ buffer: UnsafeRawBufferPointer,
        afterData: Bool,
        limits: HTTPParserLimits,
        scanner: inout HTTPBlockScanner
    ) -> Step {
        let count = buffer.count
        var lineStart = 0
        if afterData {
            // Chunk data ends with CRLF exactly (a bare LF here is a known smuggling vector).
            if count < 1 { return .needMore }
            if buffer[0] != HTTPByte.cr { return .error(.invalidChunkTerminator) }
            if count < 2 { return .needMore }
            if buffer[1] != HTTPByte.lf { return .error(.invalidChunkTerminator) }
            lineStart = 2
        }

        // Size digits, then at most maxChunkExtensionBytes, then CRLF.
        var index = lineStart
        var size: UInt64 = 0
        while index < count, let digit = HTTPByte.hexValue(buffer[index]) {
            if size > (UInt64(1) << 56) { return .error(.chunkSizeOverflow) }
            // Leading zeros are legal but bounded.
            if index - lineStart >= Self.maxSizeDigits { return .error(.invalidChunkSize) }
            size = size << 4 | digit
            index += 1
        }
        let digitsEnd = index
        if digitsEnd == count { return .needMore }
        if digitsEnd == lineStart { return .error(.invalidChunkSize) }
        let lineLimit = digitsEnd + min(max(limits.maxChunkExtensionBytes, 0), 1 << 30) + 1  // + CR
        let searchEnd = min(count, lineLimit + 1)
        guard let lf = buffer.indexOfLF(from: digitsEnd, to: searchEnd) else {
            if let error = Self.validateExtensions(buffer, digitsEnd..<searchEnd, complete: false) {
                return .error(error)
            }
            return count > lineLimit ? .error(.chunkLineTooLong) : .needMore
        }
        guard lf > digitsEnd, buffer[lf - 1] == HTTPByte.cr else {
            if let error = Self.validateExtensions(buffer, digitsEnd..<lf, complete: false) { return .error(error) }
            return .error(.invalidChunkTerminator)
        }
        if let error = Self.validateExtensions(buffer, digitsEnd..<(lf - 1), complete: true) {
            return .error(error)
        }

        if size > 0 {
            let (total, overflow) = self.chunkedTotal.addingReportingOverflow(size)
            if overflow || total > limits.maxBodyBytes { return .error(.bodyTooLarge) }
            let dataStart = lf + 1
            // Nothing consumed until the first data byte is here: the caller keeps the size line.
            if dataStart >= count { return .needMore }
            self.chunkedTotal = total
            let take = Int(min(UInt64(count - dataStart), size))
            let left = size - UInt64(take)
            self.state = left == 0 ? .chunkHeader(afterData: true) : .chunkData(remaining: left)
            return .body(dataStart..<(dataStart + take), consumed: dataStart + take, finished: false)
        }

        // Last chunk: the trailer section follows, ended by an empty line.
        let trailerStart = lf + 1
        guard let end = scanner.findEnd(buffer, lineStart: trailerStart) else {
            if count - trailerStart > limits.maxTrailerBytes { return .error(.trailersTooLarge) }
            return .needMore
        }
        if end - trailerStart > limits.maxTrailerBytes { return .error(.trailersTooLarge) }
        var facts = HTTPHeadFacts()
        do {
            let fields = try HTTPFieldParser.parse(
                buffer,
                from: trailerStart,
                to: end,
                maxCount: limits.maxHeaderCount,
                mode: .trailers,
                dropsUnderscoreNames: self.dropsUnderscoreNames,
                facts: &facts
            )
            return .end(trailers: fields.isEmpty ? nil : HTTPHeaders(fields), consumed: end)
        } catch {
            return .error(error)
        }
    }

    /// chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] ), ext-val = token / quoted-string.
    /// With `complete == false` the bytes are a prefix of the line (a trailing CR may be the line's
    /// own): only errors that no further byte could repair are reported, so that every split of the
    /// input gives the same result.
    static func validateExtensions(
        _ buffer: UnsafeRawBufferPointer,
        _ range: Range<Int>,
        complete: Bool
    ) -> HTTPParserError? {
        enum Expect {
            case semicolon, name, nameRest, afterName, valueStart, token, quoted, quotedEscape, afterValue
        }
        var range = range
        if !complete, let last = range.last, buffer[last] == HTTPByte.cr {
            range = range.lowerBound..<last
        }
        var expect = Expect.semicolon
        // Whitespace is only allowed before ";" or "=": "5 " or "5;a=b " at the end is refused.
        var pendingSpace = false
        for index in range {
            let byte = buffer[index]
            let isSpace = HTTPByte.isWhitespace(byte)
            switch expect {
            case .semicolon, .afterValue:
                if isSpace {
                    pendingSpace = true
                    continue
                }
                guard byte == HTTPByte.semicolon else { return Self.extensionError(byte) }
                pendingSpace = false
                expect = .name
            case .name:
                if isSpace { continue }
                guard HTTPByte.isToken(byte) else { return Self.extensionError(byte) }
                expect = .nameRest
            case .nameRest, .afterName:
                if expect == .nameRest, HTTPByte.isToken(byte) { continue }
                if isSpace {
                    pendingSpace = true
                    expect = .afterName
                    continue
                }
                pendingSpace = false
                if byte == HTTPByte.equals {
                    expect = .valueStart
                } else if byte == HTTPByte.semicolon {
                    expect = .name
                } else {
                    return Self.extensionError(byte)
                }
            case .valueStart:
                if isSpace { continue }
                if byte == HTTPByte.quote {
                    expect = .quoted
                } else if HTTPByte.isToken(byte) {
                    expect = .token
                } else {
                    return Self.extensionError(byte)
                }
            case .token:
                if HTTPByte.isToken(byte) { continue }
                if isSpace {
                    pendingSpace = true
                    expect = .afterValue
                } else if byte == HTTPByte.semicolon {
                    expect = .name
                } else {
                    return Self.extensionError(byte)
                }
            case .quoted:
                if byte == HTTPByte.quote {
                    expect = .afterValue
                } else if byte == HTTPByte.backslash {
                    expect = .quotedEscape
                } else if !(byte == HTTPByte.htab || byte >= 0x20 && byte != 0x7F) {
                    return Self.extensionError(byte)
                }
            case .quotedEscape:
                if !(byte == HTTPByte.htab || byte >= 0x20 && byte != 0x7F) { return Self.extensionError(byte) }
                expect = .quoted
            }
        }
        if complete {
            if pendingSpace { return .invalidChunkExtension }
            switch expect {
            case .semicolon, .nameRest, .afterName, .token, .afterValue: break
            case .name, .valueStart, .quoted, .quotedEscape: return .invalidChunkExtension
            }
        }
        return nil
    }

    @inline(__always)
    private static func extensionError(_ byte: UInt8) -> HTTPParserError {
        byte == HTTPByte.cr ? .bareCarriageReturn : .invalidChunkExtension
    }
}
