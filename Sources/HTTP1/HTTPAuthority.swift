/// A `Host` value (or `X-Forwarded-Host` in a check) as one RFC 3986 authority: a reg-name or an
/// `[IP-literal]`, then at most one `:port` of 1–5 digits. `x:80:80`, `x:` and `[::1]:1:2` are
/// refused: upstreams split them differently (the first port, the last, or the whole string).
/// Pure and bounded: the `request-rules` fuzz target checks it against a reference reading.
package enum HTTPAuthority {
    /// Why `host` is not one authority with at most one port, or nil.
    package static func violation(_ host: String) -> String? {
        // In place: this runs on every request, and a copy of the bytes would allocate.
        var host = host
        if let result = host.utf8.withContiguousStorageIfAvailable({ Self.violation(bytes: $0) }) { return result }
        host.makeContiguousUTF8()
        return host.utf8.withContiguousStorageIfAvailable { Self.violation(bytes: $0) } ?? "is not contiguous UTF-8"
    }

    private static func violation(bytes: UnsafeBufferPointer<UInt8>) -> String? {
        guard !bytes.isEmpty else { return "is empty" }
        var index = 0
        if bytes[0] == UInt8(ascii: "[") {
            // IP-literal: up to the closing bracket; its colons are the address's.
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")), close > 1 else {
                return "has an unterminated IP literal"
            }
            for byte in bytes[1..<close]
            where !(Self.isHexDigit(byte) || byte == UInt8(ascii: ":") || byte == UInt8(ascii: ".")) {
                return "has a character that is not part of an IP literal"
            }
            index = close + 1
            guard index == bytes.count || bytes[index] == UInt8(ascii: ":") else {
                return "has characters after its IP literal"
            }
        } else {
            while index < bytes.count && bytes[index] != UInt8(ascii: ":") {
                guard Self.isRegNameByte(bytes[index]) else {
                    return "has a character that is not allowed in a host name"
                }
                index += 1
            }
            if index == 0 { return "has a port but no host name" }
        }
        guard index < bytes.count else { return nil }
        // bytes[index] is the one ':' before the port.
        let port = bytes[(index + 1)...]
        guard !port.isEmpty else { return "ends in ':' without a port" }
        guard port.count <= 5, port.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return "has more than one port, or a port that is not 1 to 5 digits"
        }
        return nil
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "f"))
    }

    /// RFC 3986 reg-name: unreserved, sub-delims and `%` (pct-encoded).
    private static func isRegNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x41...0x5A, 0x61...0x7A, 0x30...0x39: true
        // - . _ ~ ! $ & ' ( ) * + , ; = %
        case 0x2D, 0x2E, 0x5F, 0x7E, 0x21, 0x24, 0x26, 0x27, 0x28, 0x29, 0x2A, 0x2B, 0x2C, 0x3B, 0x3D, 0x25: true
        default: false
        }
    }
}
