#if canImport(Glibc)
    private import Glibc
#elseif canImport(Darwin)
    private import Darwin
#endif

/// Field lines of a head or trailer section: validated, fed to `HTTPHeadFacts`, returned as
/// strings (`parse`) or as ranges of the buffer (`parseRanges`).
enum HTTPFieldParser {
    /// Which fields feed `HTTPHeadFacts`.
    enum Mode {
        case request
        case response
        case trailers
    }

    /// Parses the field lines from `start` up to the empty line that ends the block at `end`
    /// (exclusive, just past that line). Line terminator: CRLF or a bare LF (RFC 9112 §2.2);
    /// a CR anywhere else is an error.
    /// With `dropsUnderscoreNames`, a field whose name contains `_` is validated like any other
    /// (and counts towards `maxCount`) but is neither returned nor interpreted.
    static func parse(
        _ buffer: UnsafeRawBufferPointer,
        from start: Int,
        to end: Int,
        maxCount: Int,
        mode: Mode,
        dropsUnderscoreNames: Bool = false,
        facts: inout HTTPHeadFacts
    ) throws(HTTPParserError) -> [HTTPHeaders.Element] {
        var fields: [HTTPHeaders.Element] = []
        try Self.forEachField(
            buffer, from: start, to: end, maxCount: maxCount, mode: mode, dropsUnderscoreNames: dropsUnderscoreNames,
            facts: &facts
        ) { field, hasHighBytes throws(HTTPParserError) in
            if fields.isEmpty { fields.reserveCapacity(12) }
            fields.append(
                HTTPField(
                    name: Self.nameString(buffer, field.name),
                    value: try Self.valueString(buffer, field.value, hasHighBytes)
                ))
            return fields.count
        }
        return fields
    }

    /// `parse` without making strings: the fields' ranges are appended to `fields` (the same
    /// checks, the same fields; obs-text must be UTF-8 here too, so both accept the same heads).
    static func parseRanges(
        _ buffer: UnsafeRawBufferPointer,
        from start: Int,
        to end: Int,
        maxCount: Int,
        mode: Mode,
        facts: inout HTTPHeadFacts,
        into fields: inout [HTTPFieldRange]
    ) throws(HTTPParserError) {
        let first = fields.count
        try Self.forEachField(
            buffer, from: start, to: end, maxCount: maxCount, mode: mode, dropsUnderscoreNames: false, facts: &facts
        ) { field, hasHighBytes throws(HTTPParserError) in
            if hasHighBytes { _ = try Self.valueString(buffer, field.value, true) }
            fields.append(field)
            return fields.count - first
        }
    }

    /// The field name as a `String`: common names, spelled as clients send them, come from a
    /// literal (a small string constant: no UTF-8 validation, no copy); others from the bytes.
    @inline(__always)
    static func nameString(_ buffer: UnsafeRawBufferPointer, _ name: Range<Int>) -> String {
        let capitalA = buffer[name.lowerBound] == UInt8(ascii: "A")
        switch name.count {
        case 4: return Self.common(buffer, name, "Host", "Host")
        case 6:
            return capitalA
                ? Self.common(buffer, name, "Accept", "Accept") : Self.common(buffer, name, "Cookie", "Cookie")
        case 10:
            return buffer[name.lowerBound] == UInt8(ascii: "U")
                ? Self.common(buffer, name, "User-Agent", "User-Agent")
                : Self.common(buffer, name, "Connection", "Connection")
        case 12: return Self.common(buffer, name, "Content-Type", "Content-Type")
        case 13:
            return capitalA
                ? Self.common(buffer, name, "Authorization", "Authorization")
                : Self.common(buffer, name, "Cache-Control", "Cache-Control")
        case 14: return Self.common(buffer, name, "Content-Length", "Content-Length")
        case 15:
            return capitalA
                ? Self.common(buffer, name, "Accept-Encoding", "Accept-Encoding")
                : Self.common(buffer, name, "X-Forwarded-For", "X-Forwarded-For")
        default: return buffer.string(name)
        }
    }

    /// `string` when the name's bytes are exactly `literal` (the same text), else a new string.
    @inline(__always)
    private static func common(
        _ buffer: UnsafeRawBufferPointer,
        _ name: Range<Int>,
        _ literal: StaticString,
        _ string: String
    ) -> String {
        guard name.count == literal.utf8CodeUnitCount, let base = buffer.baseAddress,
            memcmp(base + name.lowerBound, literal.utf8Start, name.count) == 0
        else { return buffer.string(name) }
        return string
    }

    @inline(__always)
    private static func valueString(
        _ buffer: UnsafeRawBufferPointer,
        _ value: Range<Int>,
        _ hasHighBytes: Bool
    ) throws(HTTPParserError) -> String {
        guard hasHighBytes else { return buffer.string(value) }
        // obs-text is kept only when it is UTF-8: a String cannot carry other bytes unchanged.
        guard let decoded = String(validating: UnsafeRawBufferPointer(rebasing: buffer[value]), as: UTF8.self) else {
            throw .invalidHeaderValue
        }
        return decoded
    }

    /// Validates each field line and calls `body` with the fields kept; `body` returns the number
    /// of fields kept so far (the index for the next Host field).
    @inline(__always)
    private static func forEachField(
        _ buffer: UnsafeRawBufferPointer,
        from start: Int,
        to end: Int,
        maxCount: Int,
        mode: Mode,
        dropsUnderscoreNames: Bool,
        facts: inout HTTPHeadFacts,
        _ body: (HTTPFieldRange, _ hasHighBytes: Bool) throws(HTTPParserError) -> Int
    ) throws(HTTPParserError) {
        var kept = 0
        var lineCount = 0
        var lineStart = start
        while lineStart < end {
            guard let lf = buffer.indexOfLF(from: lineStart, to: end) else {
                // Unreachable for a block found by HTTPBlockScanner; refuse rather than trap.
                throw mode == .trailers ? .trailersTooLarge : .headersTooLarge
            }
            var lineEnd = lf
            if lineEnd > lineStart, buffer[lineEnd - 1] == HTTPByte.cr { lineEnd -= 1 }
            if lineEnd == lineStart { break }  // the empty line
            if lineCount >= maxCount { throw mode == .trailers ? .trailersTooLarge : .tooManyHeaders }
            lineCount += 1
            if let (field, hasHighBytes) = try Self.parseLine(
                buffer,
                lineStart..<lineEnd,
                mode: mode,
                dropsUnderscoreNames: dropsUnderscoreNames,
                fieldIndex: kept,
                facts: &facts
            ) {
                kept = try body(field, hasHighBytes)
            }
            lineStart = lf + 1
        }
    }

    /// One field line: validated, fed to `facts`; nil when it is dropped (`_` in its name).
    @inline(__always)
    private static func parseLine(
        _ buffer: UnsafeRawBufferPointer,
        _ line: Range<Int>,
        mode: Mode,
        dropsUnderscoreNames: Bool,
        fieldIndex: Int,
        facts: inout HTTPHeadFacts
    ) throws(HTTPParserError) -> (HTTPFieldRange, hasHighBytes: Bool)? {
        let first = buffer[line.lowerBound]
        if HTTPByte.isWhitespace(first) { throw .obsoleteLineFolding }
        var index = line.lowerBound
        var hasUnderscore = false
        while index < line.upperBound, HTTPByte.isToken(buffer[index]) {
            if buffer[index] == UInt8(ascii: "_") { hasUnderscore = true }
            index += 1
        }
        guard index < line.upperBound else { throw .invalidHeaderName }  // no colon
        let separator = buffer[index]
        if separator != HTTPByte.colon {
            if HTTPByte.isWhitespace(separator) { throw .whitespaceBeforeColon }
            if separator == HTTPByte.cr { throw .bareCarriageReturn }
            throw .invalidHeaderName
        }
        let name = line.lowerBound..<index
        if name.isEmpty { throw .invalidHeaderName }

        var valueStart = index + 1
        var valueEnd = line.upperBound
        while valueStart < valueEnd, HTTPByte.isWhitespace(buffer[valueStart]) { valueStart += 1 }
        while valueEnd > valueStart, HTTPByte.isWhitespace(buffer[valueEnd - 1]) { valueEnd -= 1 }
        let value = valueStart..<valueEnd
        let hasHighBytes = try Self.validateValue(buffer, value)
        if hasUnderscore && dropsUnderscoreNames { return nil }

        if mode != .trailers {
            switch name.count {
            case 4 where mode == .request && buffer.equalsLowercaseToken(name, "host"):
                try facts.noteHost(buffer, value, fieldIndex: fieldIndex)
            case 6 where mode == .request && buffer.equalsLowercaseToken(name, "expect"):
                if buffer.equalsLowercase(value, "100-continue") { facts.expectsContinue = true }
            case 10 where buffer.equalsLowercaseToken(name, "connection"):
                facts.noteConnection(buffer, value)
            case 14 where buffer.equalsLowercaseToken(name, "content-length"):
                try facts.noteContentLength(buffer, value)
            case 17 where buffer.equalsLowercaseToken(name, "transfer-encoding"):
                try facts.noteTransferEncoding(buffer, value)
            default:
                break
            }
        }
        return (HTTPFieldRange(name: name, value: value), hasHighBytes)
    }

    /// field-value bytes: HTAB, SP, VCHAR, obs-text. Returns whether obs-text (≥ 0x80) occurs.
    /// Eight bytes at a time: a word with no byte below 0x20, no DEL and no high bit is plain
    /// VCHAR/SP (the common case); any other word is checked byte by byte.
    @inline(__always)
    private static func validateValue(_ buffer: UnsafeRawBufferPointer, _ value: Range<Int>) throws(HTTPParserError)
        -> Bool
    {
        var index = value.lowerBound
        if let base = buffer.baseAddress {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            while index + 8 <= value.upperBound {
                let word = base.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                let below20 = (word &- ones &* 0x20) & ~word
                let del = word ^ (ones &* 0x7F)
                let isDel = (del &- ones) & ~del
                if (below20 | isDel | word) & highs != 0 { break }
                index += 8
            }
        }
        var hasHighBytes = false
        while index < value.upperBound {
            let byte = buffer[index]
            index += 1
            if byte >= 0x20 && byte < 0x7F || byte == HTTPByte.htab { continue }
            if byte >= 0x80 {
                hasHighBytes = true
                continue
            }
            throw byte == HTTPByte.cr ? .bareCarriageReturn : .invalidHeaderValue
        }
        return hasHighBytes
    }
}
