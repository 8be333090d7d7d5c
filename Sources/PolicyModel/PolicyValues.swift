#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Parsers for the value syntaxes of `policies.yaml`. Each returns nil (or a reason) on
/// bad input; `PolicyDecoder` turns that into a `PolicyError` naming line and field.
package enum PolicyValues {
    // MARK: Durations

    /// `10s`, `500ms`, `2m`, `1h`, or whole seconds (`30`). Must be positive.
    static func duration(_ text: String) -> Duration? {
        let units: [(suffix: String, milliseconds: Int)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000)]
        var number = Substring(text)
        var scale = 1000
        for unit in units where text.hasSuffix(unit.suffix) {
            // "ms" before "s" and "m": the first suffix that leaves only digits wins.
            let candidate = text.dropLast(unit.suffix.count)
            if !candidate.isEmpty && candidate.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
                number = candidate
                scale = unit.milliseconds
                break
            }
        }
        guard !number.isEmpty, number.count <= 12,
            number.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let value = Int(number), value > 0
        else { return nil }
        return .milliseconds(value * scale)
    }

    /// The shortest exact spelling: `500ms`, `10s`, `2m`, `1h`.
    package static func format(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        if milliseconds % 1000 != 0 { return "\(milliseconds)ms" }
        if seconds >= 3600 && seconds % 3600 == 0 { return "\(seconds / 3600)h" }
        if seconds >= 60 && seconds % 60 == 0 { return "\(seconds / 60)m" }
        return "\(seconds)s"
    }

    // MARK: Sizes

    /// A byte count written `1048576`, `64KiB`, `1MiB` or `1GiB` (string forms only with a unit).
    static func size(_ text: String) -> Int? {
        let units: [(String, Int)] = [("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("B", 1)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count)
            guard !number.isEmpty, number.count <= 12,
                number.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                let value = Int(number)
            else { return nil }
            return value * scale
        }
        return nil
    }

    /// `1MiB` when exact, else the plain number.
    static func formatSize(_ bytes: Int) -> String {
        if bytes >= 1 << 30 && bytes % (1 << 30) == 0 { return "\(bytes >> 30)GiB" }
        if bytes >= 1 << 20 && bytes % (1 << 20) == 0 { return "\(bytes >> 20)MiB" }
        if bytes >= 1 << 10 && bytes % (1 << 10) == 0 { return "\(bytes >> 10)KiB" }
        return "\(bytes)"
    }

    // MARK: Addresses

    static func isIPv4(_ text: some StringProtocol) -> Bool {
        var address = in_addr()
        return inet_pton(AF_INET, String(text), &address) == 1
    }

    static func isIPv6(_ text: some StringProtocol) -> Bool {
        var address = in6_addr()
        return inet_pton(AF_INET6, String(text), &address) == 1
    }

    /// A DNS host name: labels of letters, digits and `-`, separated by dots.
    /// The last label is not all digits (RFC 3696 §2), so `300.1.1.1` is a bad IPv4 address,
    /// not a host name.
    static func isHostName(_ text: some StringProtocol) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 253 else { return false }
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        if let last = labels.last, last.utf8.allSatisfy({ Self.isDigit($0) }) { return false }
        for label in labels {
            guard !label.isEmpty, label.utf8.count <= 63, label.first != "-", label.last != "-",
                label.utf8.allSatisfy({ Self.isAlphanumeric($0) || $0 == UInt8(ascii: "-") })
            else { return false }
        }
        return true
    }

    private static func port(_ text: some StringProtocol) -> UInt16? {
        guard !text.isEmpty, text.count <= 5,
            text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let value = UInt16(text), value > 0
        else { return nil }
        return value
    }

    /// `host:port` where host is an IPv4 literal, `[IPv6]` or `localhost`; else the reason.
    static func listenAddress(_ text: String) -> Result<ListenAddress, ValueProblem> {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                return .failure(ValueProblem("unterminated [IPv6] host"))
            }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return .failure(ValueProblem("missing :port after [\(host)]")) }
            portText = rest.dropFirst()
            guard Self.isIPv6(host) else { return .failure(ValueProblem("\(host) is not an IPv6 address")) }
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                return .failure(ValueProblem("missing :port (write host:port, e.g. 0.0.0.0:8080)"))
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") {
                return .failure(ValueProblem("IPv6 hosts need brackets: [\(host)]:\(portText)"))
            }
            guard host == "localhost" || Self.isIPv4(host) else {
                if host.isEmpty { return .failure(ValueProblem("missing host (e.g. 0.0.0.0:\(portText))")) }
                return .failure(
                    ValueProblem("host must be an IPv4 address, [IPv6] address or localhost; found \"\(host)\"")
                )
            }
        }
        guard let port = Self.port(portText) else {
            return .failure(ValueProblem("port must be 1-65535; found \"\(portText)\""))
        }
        return .success(ListenAddress(host: String(host), port: port))
    }

    /// `http://host[:port][/]` or `https://host[:port][/]`: host an IPv4 literal, `[IPv6]` or a
    /// DNS name; port defaults to 80 (http) or 443 (https).
    static func upstreamURL(_ text: String) -> Result<(host: String, port: UInt16, isTLS: Bool), ValueProblem> {
        let isTLS = text.hasPrefix("https://")
        guard isTLS || text.hasPrefix("http://") else {
            return .failure(ValueProblem("expected http://host[:port] or https://host[:port]"))
        }
        var rest = Substring(text.dropFirst(isTLS ? "https://".count : "http://".count))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.contains("/") || rest.contains("?") || rest.contains("#") {
            return .failure(ValueProblem("expected \(isTLS ? "https" : "http")://host[:port] without a path or query"))
        }
        if rest.contains("@") {
            return .failure(ValueProblem("user information in upstream URLs is not supported"))
        }
        var host: Substring
        var port: UInt16 = isTLS ? 443 : 80
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                return .failure(ValueProblem("unterminated [IPv6] host"))
            }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            guard Self.isIPv6(host) else { return .failure(ValueProblem("\(host) is not an IPv6 address")) }
            if !after.isEmpty {
                guard after.hasPrefix(":"), let p = Self.port(after.dropFirst()) else {
                    return .failure(ValueProblem("port must be 1-65535; found \"\(after.dropFirst())\""))
                }
                port = p
            }
        } else {
            if let colon = rest.lastIndex(of: ":") {
                host = rest[..<colon]
                guard let p = Self.port(rest[rest.index(after: colon)...]) else {
                    return .failure(
                        ValueProblem("port must be 1-65535; found \"\(rest[rest.index(after: colon)...])\"")
                    )
                }
                port = p
            } else {
                host = rest
            }
            guard Self.isIPv4(host) || Self.isHostName(host) else {
                return .failure(ValueProblem("\"\(host)\" is not an IP address or host name"))
            }
        }
        return .success((String(host), port, isTLS))
    }

    // MARK: Identifiers

    /// `TEAMID.bundle.id`: a 10-character team ID of uppercase letters and digits, a dot, and a
    /// bundle ID of letters, digits, `-` and `.` (no empty component).
    static func isAppID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count >= 12, bytes[10] == UInt8(ascii: "."),
            bytes[0..<10].allSatisfy({ ($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")) || Self.isDigit($0) })
        else { return false }
        let bundle = bytes[11...]
        return bundle.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).allSatisfy { part in
            !part.isEmpty && part.allSatisfy { Self.isAlphanumeric($0) || $0 == UInt8(ascii: "-") }
        }
    }

    /// Upstream and route names: 1-64 of letters, digits, `_`, `-`, `.` (they appear in logs and metrics labels).
    package static func isName(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && text.utf8.allSatisfy {
                Self.isAlphanumeric($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".")
            }
    }

    /// An HTTP method as clients send it: uppercase letters, digits, `-`, `_` (RFC 9110 methods are case-sensitive).
    static func isMethod(_ text: String) -> Bool {
        guard let first = text.utf8.first, first >= UInt8(ascii: "A"), first <= UInt8(ascii: "Z"), text.utf8.count <= 32
        else { return false }
        return text.utf8.allSatisfy {
            ($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")) || Self.isDigit($0) || $0 == UInt8(ascii: "-")
                || $0 == UInt8(ascii: "_")
        }
    }

    /// A route or endpoint path: absolute, printable ASCII, no query or fragment, and already
    /// normalized (see `RouteTable`), so that it can match at all.
    package static func pathProblem(_ text: String) -> ValueProblem? {
        guard text.hasPrefix("/") else { return ValueProblem("must start with /") }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return ValueProblem("must be printable ASCII without spaces (percent-encoding is not matched)")
        }
        if text.contains("?") || text.contains("#") {
            return ValueProblem("must not contain a query (?) or fragment (#)")
        }
        let canonical = Array(text.utf8).withUnsafeBufferPointer { RoutePath.isCanonical($0) }
        guard canonical else {
            return ValueProblem("must be in normalized form: no //, . or .. segments, %-escapes, ; or \\")
        }
        return nil
    }

    private static func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }

    private static func isAlphanumeric(_ b: UInt8) -> Bool {
        Self.isDigit(b) || (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z"))
            || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z"))
    }

    // MARK: Suggestions

    /// The candidate nearest to `word` by edit distance, if it is plausibly a typo of it: a
    /// few edits away, or a part of it (`prefix` for `path_prefix`, `challenge_ttl`).
    static func nearest(to word: String, in candidates: [String]) -> String? {
        let word = word.lowercased()
        var best: (candidate: String, distance: Int)?
        for candidate in candidates {
            let distance = Self.editDistance(word, candidate)
            let isTypo = distance <= max(2, candidate.count / 3)
            let isPart = word.count >= 4 && (candidate.contains(word) || word.contains(candidate))
            guard isTypo || isPart else { continue }
            if let current = best, current.distance <= distance { continue }
            best = (candidate, distance)
        }
        return best?.candidate
    }

    /// Levenshtein distance (ASCII keys are short: the quadratic table is fine).
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8)
        let b = Array(b.utf8)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}

/// Why a value was refused, in words that complete "expected ...; found ...".
package struct ValueProblem: Error, Sendable {
    var text: String
    init(_ text: String) { self.text = text }
}
