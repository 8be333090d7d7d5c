// Byte classes of HTTP/1.1 (RFC 9110 §5.6.2, RFC 9112): the parsers' character tests.

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
