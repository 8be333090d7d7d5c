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
