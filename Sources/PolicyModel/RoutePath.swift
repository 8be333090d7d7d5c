/// Path helpers for route matching, and the rule that gives every request target one meaning.
///
/// ## One meaning per request target (security decision, docs/http-parsing.md)
/// The route table and the upstream must read a target the same way, or a request can be routed
/// to an `off` route by the gateway and to a protected handler by the upstream. Upstream routers
/// differ (Express, Flask, Spring, nginx, prefix routers): some decode `%2F`, some treat `\` as
/// `/`, some cut `;params`, some resolve `..`. So the gateway forwards only targets whose path
/// reads the same under every one of those readings, and refuses the rest (400
/// `ambiguous_target`) instead of guessing which reading the upstream uses:
/// - a `.` or `..` segment, or an empty segment (`//`) other than a trailing slash;
/// - a backslash, a `;` (path parameters), a `#` anywhere in the target (fragments are never sent);
/// - a percent-escape that decodes to a byte that could change routing: an unreserved
///   character (`%76%31` is `v1`), a delimiter (`/ ? # [ ] @ : ! $ & ' ( ) * + , ; =`), `\`,
///   a control byte, or `%` followed by two hex digits (double encoding); and a malformed escape.
///
/// Escapes of every other byte (space, `"`, `<`, `>`, `^`, `` ` ``, `{`, `|`, `}`, `%` alone,
/// bytes 0x80 and above, such as UTF-8) are inert: route patterns cannot contain those bytes, so
/// the raw and the decoded spelling match the same routes, and they are forwarded unchanged.
///
/// A route may accept encoded separators (`allow_encoded_slashes: true`, for APIs that carry
/// `/` inside a segment, such as object keys): `%2F` and `%5C` are then data. Such a target is
/// accepted only when it matches that route under the raw reading **and** under the fully
/// decoded, dot-resolved reading; it is forwarded exactly as matched.
package enum RoutePath {
    private static let slash = UInt8(ascii: "/")
    private static let dot = UInt8(ascii: ".")
    private static let percent = UInt8(ascii: "%")
    private static let backslash = UInt8(ascii: "\\")
    private static let semicolon = UInt8(ascii: ";")
    private static let question = UInt8(ascii: "?")
    private static let hash = UInt8(ascii: "#")

    /// How a path part reads (see the type's rule).
    package enum Form: Equatable, Sendable {
        /// One reading only: matched and forwarded as received.
        case canonical
        /// Canonical but for `%2F` / `%5C` escapes (accepted only on routes that allow them).
        case encodedSeparators
        /// Refused: the reason names the spelling.
        case ambiguous(Ambiguity)
    }

    /// Why a target has more than one reading. The raw values appear in the 400's message.
    package enum Ambiguity: String, Sendable, Equatable {
        case dotSegment = "a . or .. path segment"
        case emptySegment = "an empty path segment (//)"
        case backslash = "a backslash"
        case pathParameter = "a ; path parameter"
        case fragment = "a # fragment"
        case encodedSignificantByte = "a percent-escape of a character that routers decode (unreserved or delimiter)"
        case encodedSeparator = "an encoded / or \\ (%2F, %5C) on a route that does not allow them"
        case doubleEncoding = "a double percent-escape (%25 followed by two hex digits)"
        case malformedEscape = "a % not followed by two hex digits"
        case encodedControl = "a percent-escape of a control character"
        case readingsDisagree = "a spelling that decoding and dot-segment resolution route elsewhere"
    }

    /// The form of a whole request target (path and optional query) and the length of its
    /// path part. One pass: the path up to `?`, then the query for a `#`.
    package static func form(target: UnsafeBufferPointer<UInt8>) -> (form: Form, pathLength: Int) {
        let (form, length) = Self.scan(target, stopAtQuery: true)
        if case .ambiguous = form { return (form, length) }
        var i = length
        while i < target.count {
            if target[i] == Self.hash { return (.ambiguous(.fragment), length) }
            i += 1
        }
        return (form, length)
    }

    /// The form of a path (no query). Allocation-free; one pass.
    static func form(path: UnsafeBufferPointer<UInt8>) -> Form {
        Self.scan(path, stopAtQuery: false).form
    }

    /// Reads `bytes` up to the end (or the first `?`), returning the form and where it stopped.
    @inline(__always)
    private static func scan(_ bytes: UnsafeBufferPointer<UInt8>, stopAtQuery: Bool) -> (form: Form, pathLength: Int) {
        var end = bytes.count
        var sawEncodedSeparator = false
        var segmentStart = 0
        var i = 0
        while i <= end {
            var byte = i < end ? bytes[i] : Self.slash
            if stopAtQuery && byte == Self.question && i < end {
                end = i
                byte = Self.slash
            }
            let path = bytes
            switch byte {
            case Self.percent:
                guard i + 2 < end, let high = hexValue(path[i + 1]), let low = hexValue(path[i + 2]) else {
                    return (.ambiguous(.malformedEscape), end)
                }
                let decoded = high << 4 | low
                switch Self.escapeClass(decoded) {
                case .inert:
                    if decoded == Self.percent, i + 4 < end, hexValue(path[i + 3]) != nil,
                        hexValue(path[i + 4]) != nil
                    {
                        return (.ambiguous(.doubleEncoding), end)
                    }
                case .separator:
                    sawEncodedSeparator = true
                case .significant:
                    return (.ambiguous(.encodedSignificantByte), end)
                case .control:
                    return (.ambiguous(.encodedControl), end)
                }
                i += 3
                continue
            case Self.backslash:
                return (.ambiguous(.backslash), end)
            case Self.semicolon:
                return (.ambiguous(.pathParameter), end)
            case Self.hash:
                return (.ambiguous(.fragment), end)
            case Self.slash:
                let length = i - segmentStart
                if i > 0 {
                    // An empty segment between two slashes (a trailing slash is fine).
                    if length == 0 && i < end { return (.ambiguous(.emptySegment), end) }
                    if length == 1 && path[segmentStart] == Self.dot { return (.ambiguous(.dotSegment), end) }
                    if length == 2 && path[segmentStart] == Self.dot && path[segmentStart + 1] == Self.dot {
                        return (.ambiguous(.dotSegment), end)
                    }
                }
                segmentStart = i + 1
            default:
                break
            }
            i += 1
        }
        return (sawEncodedSeparator ? .encodedSeparators : .canonical, end)
    }

    /// True when the path has exactly one reading (what route patterns must be).
    static func isCanonical(_ path: UnsafeBufferPointer<UInt8>) -> Bool {
        Self.form(path: path) == .canonical
    }

    private enum EscapeClass { case inert, separator, significant, control }

    /// What decoding `%XX` to `byte` can do to routing.
    private static func escapeClass(_ byte: UInt8) -> EscapeClass {
        switch byte {
        case 0x00...0x1F, 0x7F: return .control
        case Self.slash, Self.backslash: return .separator
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return .significant
        default:
            // Unreserved marks, gen-delims and sub-delims (RFC 3986 §2.2, §2.3).
            return "-._~:/?#[]@!$&'()*+,;=".utf8.contains(byte) ? .significant : .inert
        }
    }

    /// The fully decoded reading: percent-escapes decoded once, `\` as `/`, `;params` cut from
    /// each segment, empty and `.` segments dropped, `..` removing the previous segment (never
    /// above the root), as RFC 3986 §5.2.4 and the most permissive upstream routers read it.
    /// Used to check that an `allow_encoded_slashes` target routes the same under it.
    package static func normalize(_ path: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        // 1. Decode percent-escapes once; invalid escapes stay literal. `\` becomes `/`.
        var decoded: [UInt8] = []
        decoded.reserveCapacity(path.count)
        var i = 0
        while i < path.count {
            let byte = path[i]
            if byte == Self.percent, i + 2 < path.count, let high = hexValue(path[i + 1]),
                let low = hexValue(path[i + 2])
            {
                let value = high << 4 | low
                decoded.append(value == Self.backslash ? Self.slash : value)
                i += 3
                continue
            }
            decoded.append(byte == Self.backslash ? Self.slash : byte)
            i += 1
        }
        // 2. Split into segments, strip `;params`, resolve `.` / `..`, drop empty segments.
        var segments: [ArraySlice<UInt8>] = []
        var endsWithSlash = false
        var start = 0
        var j = 0
        while j <= decoded.count {
            if j == decoded.count || decoded[j] == Self.slash {
                var segment = decoded[start..<j]
                if let semicolon = segment.firstIndex(of: Self.semicolon) {
                    segment = segment[segment.startIndex..<semicolon]
                }
                let isLast = j == decoded.count
                if segment.isEmpty {
                    // Empty segment: a trailing one keeps the trailing slash.
                    if isLast && start > 0 { endsWithSlash = true }
                } else if segment.elementsEqual([Self.dot]) {
                    if isLast { endsWithSlash = true }
                } else if segment.elementsEqual([Self.dot, Self.dot]) {
                    if !segments.isEmpty { segments.removeLast() }
                    if isLast { endsWithSlash = true }
                } else {
                    segments.append(segment)
                }
                start = j + 1
            }
            j += 1
        }
        var result: [UInt8] = [Self.slash]
        result.reserveCapacity(decoded.count + 1)
        for (index, segment) in segments.enumerated() {
            if index > 0 { result.append(Self.slash) }
            result.append(contentsOf: segment)
        }
        if endsWithSlash && !segments.isEmpty { result.append(Self.slash) }
        return result
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
