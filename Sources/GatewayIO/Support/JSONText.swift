/// Minimal JSON text building for the hot path (access log, error bodies), where
/// Foundation's JSONSerialization would allocate far more than needed.
package enum JSONText {
    /// `s` as a JSON string literal, quotes included.
    package static func quote(_ s: some StringProtocol) -> String {
        var out = "\""
        out.reserveCapacity(s.utf8.count + 2)
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
        return out
    }

    /// An object from ordered key/raw-JSON-value pairs.
    package static func object(_ pairs: [(String, String)]) -> String {
        var out = "{"
        for (i, (key, value)) in pairs.enumerated() {
            if i > 0 { out += "," }
            out += quote(key)
            out += ":"
            out += value
        }
        out += "}"
        return out
    }
}
