import Verification

/// Standard base64 (RFC 4648 §4, with padding) over UTF-8 bytes, without Foundation.
///
/// Every protected request decodes two headers (key ID and assertion) and re-encodes the
/// key ID; Foundation's `trimmingCharacters` + `Data(base64Encoded:)` bridge through
/// `NSString` (UTF-16) and cost several microseconds per request. `EndpointRequests`
/// keeps the documented behaviour (surrounding spaces and tabs trimmed) and falls back to
/// Foundation for the one case this cannot decide: non-ASCII bytes at either end (Unicode
/// blanks, which Foundation trims too).
package enum Base64Text {
    /// What decoding one header value gave.
    package enum Decoded: Equatable, Sendable {
        case bytes([UInt8])
        /// Not standard base64 with padding (after trimming ASCII blanks).
        case invalid
        /// Starts or ends with a non-ASCII byte: Unicode whitespace rules decide (caller).
        case needsUnicodeTrim
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// 0...63 for the alphabet, 0xFF for anything else (including `=`).
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    /// Decodes standard base64 with padding after trimming ASCII spaces and tabs at both ends.
    /// Strict: the length is a multiple of 4 and `=` appears only as the last one or two
    /// characters. The unused low bits of a padded final group are ignored, as Foundation's
    /// decoder does. Empty input (after trimming) is `.invalid`.
    package static func decode(_ utf8: UnsafeBufferPointer<UInt8>) -> Decoded {
        var start = 0
        var end = utf8.count
        while start < end, utf8[start] == 0x20 || utf8[start] == 0x09 { start += 1 }
        while end > start, utf8[end - 1] == 0x20 || utf8[end - 1] == 0x09 { end -= 1 }
        guard start < end else { return .invalid }
        if utf8[start] >= 0x80 || utf8[end - 1] >= 0x80 { return .needsUnicodeTrim }
        let count = end - start
        guard count % 4 == 0 else { return .invalid }
        var padding = 0
        if utf8[end - 1] == UInt8(ascii: "=") {
            padding = utf8[end - 2] == UInt8(ascii: "=") ? 2 : 1
        }
        // Written through buffer pointers: appending byte by byte, with the table's bounds
        // checks, cost ~15 instructions per character (callgrind, BENCHMARKS.md).
        var valid = true
        // Every byte is written when the text is valid; an invalid one is not returned.
        let out = [UInt8](count: count / 4 * 3 - padding) { output in
            Self.values.withUnsafeBufferPointer { values in
                var written = 0
                var index = start
                let fullEnd = padding == 0 ? end : end - 4
                while index < fullEnd {
                    let a = values[Int(utf8[index])], b = values[Int(utf8[index + 1])]
                    let c = values[Int(utf8[index + 2])], d = values[Int(utf8[index + 3])]
                    guard (a | b | c | d) & 0xC0 == 0 else {
                        valid = false
                        return
                    }
                    output[written] = a << 2 | b >> 4
                    output[written + 1] = b << 4 | c >> 2
                    output[written + 2] = c << 6 | d
                    written += 3
                    index += 4
                }
                if padding > 0 {
                    let a = values[Int(utf8[index])], b = values[Int(utf8[index + 1])]
                    guard (a | b) & 0xC0 == 0 else {
                        valid = false
                        return
                    }
                    output[written] = a << 2 | b >> 4
                    written += 1
                    if padding == 1 {
                        let c = values[Int(utf8[index + 2])]
                        guard c & 0xC0 == 0 else {
                            valid = false
                            return
                        }
                        output[written] = b << 4 | c >> 2
                        written += 1
                    }
                }
            }
        }
        return valid ? .bytes(out) : .invalid
    }

    /// Standard base64 with padding.
    /// base64url without padding (RFC 4648 §5): the challenge alphabet, JWT segments.
    package static func encodeURL(_ bytes: [UInt8]) -> String {
        var utf8 = Array(Self.encode(bytes).utf8)
        while utf8.last == UInt8(ascii: "=") { utf8.removeLast() }
        for index in utf8.indices {
            if utf8[index] == UInt8(ascii: "+") {
                utf8[index] = UInt8(ascii: "-")
            } else if utf8[index] == UInt8(ascii: "/") {
                utf8[index] = UInt8(ascii: "_")
            }
        }
        return String(decoding: utf8, as: UTF8.self)
    }

    package static func encode(_ bytes: [UInt8]) -> String {
        let count = (bytes.count + 2) / 3 * 4
        return String(unsafeUninitializedCapacity: count) { output in
            Self.alphabet.withUnsafeBufferPointer { alphabet in
                bytes.withUnsafeBufferPointer { bytes in
                    var written = 0
                    var index = 0
                    while index + 3 <= bytes.count {
                        let value =
                            UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
                        output[written] = alphabet[Int(value >> 18 & 0x3F)]
                        output[written + 1] = alphabet[Int(value >> 12 & 0x3F)]
                        output[written + 2] = alphabet[Int(value >> 6 & 0x3F)]
                        output[written + 3] = alphabet[Int(value & 0x3F)]
                        written += 4
                        index += 3
                    }
                    let rest = bytes.count - index
                    if rest > 0 {
                        let value = UInt32(bytes[index]) << 16 | (rest == 2 ? UInt32(bytes[index + 1]) << 8 : 0)
                        output[written] = alphabet[Int(value >> 18 & 0x3F)]
                        output[written + 1] = alphabet[Int(value >> 12 & 0x3F)]
                        output[written + 2] = rest == 2 ? alphabet[Int(value >> 6 & 0x3F)] : UInt8(ascii: "=")
                        output[written + 3] = UInt8(ascii: "=")
                    }
                }
            }
            return count
        }
    }
}
