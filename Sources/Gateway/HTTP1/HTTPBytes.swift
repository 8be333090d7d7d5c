#if canImport(Glibc)
    private import Glibc
#elseif canImport(Darwin)
    private import Darwin
#endif

// Byte-level building blocks shared by the request and response parsers: character classes,
// line and block scanning, and the header field parser. Everything works on the caller's
// `UnsafeRawBufferPointer`; a `String` is made only for a field name and value.

enum HTTPByte {
    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A
    static let sp: UInt8 = 0x20
    static let htab: UInt8 = 0x09
    static let colon: UInt8 = 0x3A
    static let comma: UInt8 = 0x2C
    static let semicolon: UInt8 = 0x3B
    static let equals: UInt8 = 0x3D
    static let quote: UInt8 = 0x22
    static let backslash: UInt8 = 0x5C

    /// tchar (RFC 9110 §5.6.2) as two 64-bit masks: bytes 0–63 and 64–127.
    private static let tokenLow: UInt64 = 0x03ff_6cfa_0000_0000
    private static let tokenHigh: UInt64 = 0x57ff_ffff_c7ff_fffe

    @inline(__always)
    static func isToken(_ byte: UInt8) -> Bool {
        if byte >= 128 { return false }
        let mask = byte < 64 ? Self.tokenLow : Self.tokenHigh
        return (mask >> UInt64(byte & 63)) & 1 == 1
    }

    /// A byte of a method as the gateway accepts it: `A-Z`, `_`, `-` (nginx's rule). RFC 9110
    /// methods are case-sensitive tokens; a lower-case `post` is refused rather than matched
    /// or forwarded, because routers that upper-case it (Werkzeug) would run the POST handler
    /// for a request that the route table did not read as POST.
    @inline(__always)
    static func isMethodByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) || byte == UInt8(ascii: "_")
            || byte == UInt8(ascii: "-")
    }

    @inline(__always)
    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == Self.sp || byte == Self.htab
    }

    @inline(__always)
    static func isDigit(_ byte: UInt8) -> Bool {
        byte &- 0x30 < 10
    }

    /// Value of a hex digit, or nil.
    @inline(__always)
    static func hexValue(_ byte: UInt8) -> UInt64? {
        switch byte {
        case 0x30...0x39: UInt64(byte - 0x30)
        case 0x41...0x46: UInt64(byte - 0x41 + 10)
        case 0x61...0x66: UInt64(byte - 0x61 + 10)
        default: nil
        }
    }

    @inline(__always)
    static func upper(_ byte: UInt8) -> UInt8 {
        (byte >= 0x61 && byte <= 0x7A) ? byte & ~0x20 : byte
    }

    @inline(__always)
    static func lower(_ byte: UInt8) -> UInt8 {
        (byte >= 0x41 && byte <= 0x5A) ? byte | 0x20 : byte
    }
}

extension UnsafeRawBufferPointer {
    /// Index of the first LF in `from..<to`, or nil. Uses memchr (vectorised in libc).
    @inline(__always)
    func indexOfLF(from: Int, to: Int) -> Int? {
        guard from < to, let base = self.baseAddress else { return nil }
        guard let hit = memchr(base + from, Int32(HTTPByte.lf), to - from) else { return nil }
        return base.distance(to: UnsafeRawPointer(hit))
    }

    /// ASCII case-insensitive comparison of `self[range]` with a lowercase literal.
    @inline(__always)
    func equalsLowercase(_ range: Range<Int>, _ literal: StaticString) -> Bool {
        guard range.count == literal.utf8CodeUnitCount else { return false }
        let lit = literal.utf8Start
        var i = 0
        for index in range {
            if HTTPByte.lower(self[index]) != lit[i] { return false }
            i += 1
        }
        return true
    }

    /// `equalsLowercase` for bytes that are token characters (a parsed field name) or a checked
    /// field value, eight at a time. `literal` holds lowercase letters, digits and '-' only;
    /// folding such a byte with `| 0x20` gives one of those only from its capital or from itself
    /// (CR, which would fold onto '-', and the controls that would fold onto digits are in
    /// neither; HTAB folds onto ')', DEL and bytes from 0x80 onto no ASCII letter).
    @inline(__always)
    func equalsLowercaseToken(_ range: Range<Int>, _ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard range.count == count else { return false }
        guard count > 0, let base = self.baseAddress else { return true }
        let lit = UnsafeRawPointer(literal.utf8Start)
        var i = 0
        while i + 8 <= count {
            let a = base.loadUnaligned(fromByteOffset: range.lowerBound + i, as: UInt64.self)
            if a | 0x2020_2020_2020_2020 != lit.loadUnaligned(fromByteOffset: i, as: UInt64.self) { return false }
            i += 8
        }
        while i < count {
            let a = base.load(fromByteOffset: range.lowerBound + i, as: UInt8.self)
            if a | 0x20 != lit.load(fromByteOffset: i, as: UInt8.self) { return false }
            i += 1
        }
        return true
    }

    @inline(__always)
    func string(_ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: self[range]), as: UTF8.self)
    }
}

/// Finds the end of a block of lines that is closed by an empty line (a head or a trailer
/// section). Remembers how far it has looked, so that feeding a block byte by byte stays linear:
/// this relies on the parser contract that unconsumed bytes are passed again, unchanged, at the
/// start of the next buffer. Reset whenever bytes are consumed.
struct HTTPBlockScanner: Sendable {
    private var scanned = 0

    mutating func reset() {
        self.scanned = 0
    }

    /// `lineStart` is the index where the first line of the block starts; an empty first line
    /// ends the block immediately. Returns the index just past the empty line, or nil.
    mutating func findEnd(_ buffer: UnsafeRawBufferPointer, lineStart: Int) -> Int? {
        let count = buffer.count
        // The first line may itself be the empty line (a trailer section without fields).
        if self.scanned <= lineStart {
            if lineStart >= count { return nil }
            if buffer[lineStart] == HTTPByte.lf { return lineStart + 1 }
            if buffer[lineStart] == HTTPByte.cr {
                if lineStart + 1 >= count { return nil }
                if buffer[lineStart + 1] == HTTPByte.lf { return lineStart + 2 }
            }
            self.scanned = lineStart
        }
        var index = self.scanned
        while let lf = buffer.indexOfLF(from: index, to: count) {
            // An empty line follows this LF when the next bytes are LF or CR LF.
            if lf + 1 >= count {
                self.scanned = lf
                return nil
            }
            let next = buffer[lf + 1]
            if next == HTTPByte.lf { return lf + 2 }
            if next == HTTPByte.cr {
                if lf + 2 >= count {
                    self.scanned = lf
                    return nil
                }
                if buffer[lf + 2] == HTTPByte.lf { return lf + 3 }
            }
            index = lf + 1
        }
        self.scanned = count
        return nil
    }
}

/// What the head parser learned from the fields that decide framing and connection handling.
struct HTTPHeadFacts {
    var contentLength: UInt64?
    var hasTransferEncoding = false
    var codingCount = 0
    var chunkedCount = 0
    var lastCodingIsChunked = false
    var lastCodingIsKnown = false
    var connectionClose = false
    var connectionKeepAlive = false
    /// A Connection element other than `close` and `keep-alive` (it names a hop-by-hop field).
    var connectionNamesFields = false
    var hostCount = 0
    /// Index in the field list of the (single) Host field.
    var hostFieldIndex = -1
    var expectsContinue = false

    /// Content-Length: 1*DIGIT, below about 2^62 (any number of leading zeros).
    mutating func noteContentLength(_ buffer: UnsafeRawBufferPointer, _ value: Range<Int>) throws(HTTPParserError) {
        if self.contentLength != nil { throw .duplicateContentLength }
        if value.isEmpty { throw .invalidContentLength }
        var length: UInt64 = 0
        for index in value {
            let byte = buffer[index]
            guard HTTPByte.isDigit(byte) else { throw .invalidContentLength }
            // Checked before multiplying: 2^62 / 10 rounded down; leading zeros keep it at 0.
            if length > 461_168_601_842_738_790 { throw .invalidContentLength }
            length = length * 10 + UInt64(byte &- 0x30)
        }
        self.contentLength = length
    }

    /// Transfer-Encoding is a comma-separated list of codings; several field lines form one list.
    mutating func noteTransferEncoding(_ buffer: UnsafeRawBufferPointer, _ value: Range<Int>) throws(HTTPParserError) {
        self.hasTransferEncoding = true
        var sawElement = false
        var failure: HTTPParserError?
        HTTPList.forEachElement(buffer, value) { element in
            // A coding is a token, optionally followed by parameters; chunked takes none.
            var end = element.lowerBound
            while end < element.upperBound, HTTPByte.isToken(buffer[end]) { end += 1 }
            let name = element.lowerBound..<end
            if name.isEmpty {
                failure = .invalidTransferEncoding
                return false
            }
            sawElement = true
            self.codingCount += 1
            let isChunked = buffer.equalsLowercase(name, "chunked")
            if isChunked {
                if end != element.upperBound {
                    failure = .invalidTransferEncoding
                    return false
                }
                self.chunkedCount += 1
            } else if end != element.upperBound, buffer[end] != HTTPByte.semicolon,
                !HTTPByte.isWhitespace(buffer[end])
            {
                failure = .invalidTransferEncoding
                return false
            }
            self.lastCodingIsChunked = isChunked
            self.lastCodingIsKnown =
                isChunked || buffer.equalsLowercase(name, "gzip") || buffer.equalsLowercase(name, "x-gzip")
                || buffer.equalsLowercase(name, "deflate") || buffer.equalsLowercase(name, "compress")
                || buffer.equalsLowercase(name, "x-compress") || buffer.equalsLowercase(name, "identity")
            return true
        }
        if let failure { throw failure }
        if !sawElement { throw .invalidTransferEncoding }
    }

    /// Connection options: only `close` and `keep-alive` matter here; other tokens name hop-by-hop
    /// fields and are handled by HeaderRewriting.
    /// `value` is a checked field value (no controls but HTAB), for which the folding comparison
    /// is exact too: HTAB, SP and bytes from 0x80 fold onto nothing in these literals.
    mutating func noteConnection(_ buffer: UnsafeRawBufferPointer, _ value: Range<Int>) {
        HTTPList.forEachElement(buffer, value) { element in
            if buffer.equalsLowercaseToken(element, "close") {
                self.connectionClose = true
            } else if buffer.equalsLowercaseToken(element, "keep-alive") {
                self.connectionKeepAlive = true
            } else {
                self.connectionNamesFields = true
            }
            return true
        }
    }

    /// Host: reg-name / IP-literal characters and an optional port (RFC 3986 authority without userinfo).
    mutating func noteHost(_ buffer: UnsafeRawBufferPointer, _ value: Range<Int>, fieldIndex: Int)
        throws(HTTPParserError)
    {
        self.hostCount += 1
        if self.hostCount > 1 { throw .duplicateHost }
        self.hostFieldIndex = fieldIndex
        try HTTPHeadFacts.validateAuthority(buffer, value)
    }

    static func validateAuthority(_ buffer: UnsafeRawBufferPointer, _ value: Range<Int>) throws(HTTPParserError) {
        if value.isEmpty { throw .invalidHost }
        for index in value {
            switch buffer[index] {
            case 0x41...0x5A, 0x61...0x7A, 0x30...0x39: continue
            // - . _ ~ ! $ & ' ( ) * + , ; = : [ ] %
            case 0x2D, 0x2E, 0x5F, 0x7E, 0x21, 0x24, 0x26, 0x27, 0x28, 0x29, 0x2A, 0x2B, 0x2C, 0x3B, 0x3D, 0x3A,
                0x5B, 0x5D, 0x25:
                continue
            default: throw .invalidHost
            }
        }
    }
}

enum HTTPList {
    /// Calls `body` with each non-empty element of a comma-separated list, trimmed of OWS.
    /// Stops early when `body` returns false.
    @inline(__always)
    static func forEachElement(
        _ buffer: UnsafeRawBufferPointer,
        _ value: Range<Int>,
        _ body: (Range<Int>) -> Bool
    ) {
        var start = value.lowerBound
        while start <= value.upperBound {
            var end = start
            while end < value.upperBound, buffer[end] != HTTPByte.comma { end += 1 }
            var lower = start
            var upper = end
            while lower < upper, HTTPByte.isWhitespace(buffer[lower]) { lower += 1 }
            while upper > lower, HTTPByte.isWhitespace(buffer[upper - 1]) { upper -= 1 }
            if lower < upper, !body(lower..<upper) { return }
            start = end + 1
        }
    }
}

/// One header field as two ranges of the buffer it was parsed from (name; value without OWS).
package struct HTTPFieldRange: Sendable, Hashable {
    package var name: Range<Int>
    package var value: Range<Int>

    package init(name: Range<Int>, value: Range<Int>) {
        self.name = name
        self.value = value
    }
}

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
                (
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

enum HTTPVersion {
    /// `HTTP/1.1` → 1, `HTTP/1.0` → 0; other digits → 505; anything else → 400.
    static func parseMinor(_ buffer: UnsafeRawBufferPointer, _ range: Range<Int>) throws(HTTPParserError) -> Int {
        guard range.count == 8 else { throw .invalidVersion }
        let b = range.lowerBound
        guard buffer[b] == 0x48, buffer[b + 1] == 0x54, buffer[b + 2] == 0x54, buffer[b + 3] == 0x50,
            buffer[b + 4] == 0x2F, HTTPByte.isDigit(buffer[b + 5]), buffer[b + 6] == 0x2E,
            HTTPByte.isDigit(buffer[b + 7])
        else { throw .invalidVersion }
        guard buffer[b + 5] == 0x31, buffer[b + 7] == 0x30 || buffer[b + 7] == 0x31 else {
            throw .unsupportedVersion
        }
        return Int(buffer[b + 7] - 0x30)
    }
}

extension String {
    /// ASCII case-insensitive equality with a lowercase literal, on the UTF-8 bytes. Concrete (no
    /// generic StringProtocol path): the proxy calls it for every field of every message.
    @inline(__always)
    func equalsLowercaseASCII(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard self.utf8.count == count else { return false }
        let lit = literal.utf8Start
        if let result = self.utf8.withContiguousStorageIfAvailable({ bytes -> Bool in
            for index in 0..<count where HTTPByte.lower(bytes[index]) != lit[index] { return false }
            return true
        }) {
            return result
        }
        var index = 0
        for byte in self.utf8 {
            if HTTPByte.lower(byte) != lit[index] { return false }
            index += 1
        }
        return true
    }

    /// ASCII case-insensitive equality of two strings, on the UTF-8 bytes.
    func equalsCaseInsensitiveASCII(_ other: String) -> Bool {
        let count = self.utf8.count
        guard count == other.utf8.count else { return false }
        let fast = self.utf8.withContiguousStorageIfAvailable { a in
            other.utf8.withContiguousStorageIfAvailable { b in
                for index in 0..<count where HTTPByte.lower(a[index]) != HTTPByte.lower(b[index]) { return false }
                return true
            }
        }
        if let fast, let result = fast { return result }
        return zip(self.utf8, other.utf8).allSatisfy { HTTPByte.lower($0) == HTTPByte.lower($1) }
    }

    /// Concrete overload of `StringProtocol.caseInsensitiveEquals` (HTTPHead.swift) for two
    /// Strings: `HTTPHeaders` lookups and every other String–String call pick it instead of the
    /// generic version, which costs generic dispatch and a zip iterator per call.
    package func caseInsensitiveEquals(_ other: String) -> Bool {
        self.equalsCaseInsensitiveASCII(other)
    }
}
