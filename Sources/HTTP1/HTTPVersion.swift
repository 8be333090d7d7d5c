/// The HTTP-version of a start line (RFC 9112 §2.3).
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
