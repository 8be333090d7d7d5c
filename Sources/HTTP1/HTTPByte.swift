// Byte classes of HTTP/1.1 (RFC 9110 §5.6.2, RFC 9112): the parsers' character tests.

/// `@inlinable` throughout: the gateway tests bytes with these on every request.
@usableFromInline package enum HTTPByte {
    @inlinable package static var cr: UInt8 { 0x0D }
    @inlinable package static var lf: UInt8 { 0x0A }
    @inlinable package static var sp: UInt8 { 0x20 }
    @inlinable package static var htab: UInt8 { 0x09 }
    @inlinable package static var colon: UInt8 { 0x3A }
    @inlinable package static var comma: UInt8 { 0x2C }
    @inlinable package static var semicolon: UInt8 { 0x3B }
    @inlinable package static var equals: UInt8 { 0x3D }
    @inlinable package static var quote: UInt8 { 0x22 }
    @inlinable package static var backslash: UInt8 { 0x5C }

    /// tchar (RFC 9110 §5.6.2) as two 64-bit masks: bytes 0–63 and 64–127.
    @inlinable static var tokenLow: UInt64 { 0x03ff_6cfa_0000_0000 }
    @inlinable static var tokenHigh: UInt64 { 0x57ff_ffff_c7ff_fffe }

    @inlinable @inline(__always)
    package static func isToken(_ byte: UInt8) -> Bool {
        if byte >= 128 { return false }
        let mask = byte < 64 ? Self.tokenLow : Self.tokenHigh
        return (mask >> UInt64(byte & 63)) & 1 == 1
    }

    /// A byte of a method as the gateway accepts it: `A-Z`, `_`, `-` (nginx's rule). RFC 9110
    /// methods are case-sensitive tokens; a lower-case `post` is refused rather than matched
    /// or forwarded, because routers that upper-case it (Werkzeug) would run the POST handler
    /// for a request that the route table did not read as POST.
    @inlinable @inline(__always)
    package static func isMethodByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) || byte == UInt8(ascii: "_")
            || byte == UInt8(ascii: "-")
    }

    @inlinable @inline(__always)
    package static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == Self.sp || byte == Self.htab
    }

    @inlinable @inline(__always)
    package static func isDigit(_ byte: UInt8) -> Bool {
        byte &- 0x30 < 10
    }

    /// Value of a hex digit, or nil.
    @inlinable @inline(__always)
    package static func hexValue(_ byte: UInt8) -> UInt64? {
        switch byte {
        case 0x30...0x39: UInt64(byte - 0x30)
        case 0x41...0x46: UInt64(byte - 0x41 + 10)
        case 0x61...0x66: UInt64(byte - 0x61 + 10)
        default: nil
        }
    }

    @inlinable @inline(__always)
    package static func upper(_ byte: UInt8) -> UInt8 {
        (byte >= 0x61 && byte <= 0x7A) ? byte & ~0x20 : byte
    }

    @inlinable @inline(__always)
    package static func lower(_ byte: UInt8) -> UInt8 {
        (byte >= 0x41 && byte <= 0x5A) ? byte | 0x20 : byte
    }
}
