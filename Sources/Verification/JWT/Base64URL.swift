import Foundation

/// base64url without padding (RFC 7515 §2, RFC 4648 §5), strict: only the URL-safe alphabet,
/// no `=`, no whitespace, and the canonical spelling only (unused bits of the last character
/// zero), so one token has exactly one text.
public enum Base64URL {
    /// The bytes of `text`, or nil when it is not canonical unpadded base64url.
    public static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        guard text.count % 4 != 1 else { return nil }
        var standard: [UInt8] = []
        standard.reserveCapacity(text.count + 3)
        for byte in text {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                standard.append(byte)
            case UInt8(ascii: "-"): standard.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): standard.append(UInt8(ascii: "/"))
            default: return nil
            }
        }
        while standard.count % 4 != 0 { standard.append(UInt8(ascii: "=")) }
        guard let data = Data(base64Encoded: Data(standard)) else { return nil }
        let bytes = [UInt8](data)
        // Foundation ignores the unused low bits of the last character: re-encoding catches
        // the other spellings of the same bytes.
        guard Self.encode(bytes).utf8.elementsEqual(text) else { return nil }
        return bytes
    }

    /// The canonical unpadded base64url text of `bytes`.
    public static func encode(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        while text.last == "=" { text.removeLast() }
        return String(
            text.map { character -> Character in
                switch character {
                case "+": "-"
                case "/": "_"
                default: character
                }
            })
    }
}
