/// `https://host[:port]` that replaces Apple's host for both environments (tests, egress
/// proxies): policy `apple.devicecheck_url` / `apple.attest_data_url`.
public struct AppleServerOverride: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16 = 443) {
        self.host = host
        self.port = port
    }

    /// Parses `https://host[:port]` (an optional trailing `/`); IPv6 literals in brackets.
    /// nil for another scheme, a path, user information, or a bad port.
    public init?(parsing text: String) {
        guard text.hasPrefix("https://") else { return nil }
        var rest = Substring(text.dropFirst("https://".count))
        if rest.hasSuffix("/") { rest.removeLast() }
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("@"), !rest.contains("?"), !rest.contains("#")
        else { return nil }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty,
            host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == ":") })
        else { return nil }
        var port: UInt16 = 443
        if let portText {
            guard let value = UInt16(portText), value > 0 else { return nil }
            port = value
        }
        self.host = String(host)
        self.port = port
    }

    public var description: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        return self.port == 443 ? "https://\(host)" : "https://\(host):\(self.port)"
    }
}
