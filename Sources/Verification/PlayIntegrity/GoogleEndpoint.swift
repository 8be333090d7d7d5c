/// `https://host[:port][/path]`: where the gateway reaches Google's token endpoint
/// (`token_uri` of the service-account file) or the Play Integrity API (`api_url`, for tests
/// and egress proxies). Strict: https only, no user information, query or fragment, an ASCII
/// host name or IP literal (IPv6 in brackets). The gateway's one parser of an https origin:
/// OutboundHTTP's `OutboundOrigin` (Apple's host overrides, the origin of
/// `android.revocation.url`) is this parse without a path.
public struct GoogleEndpoint: Sendable, Hashable, CustomStringConvertible {
    public static let playIntegrityAPI = GoogleEndpoint(host: "playintegrity.googleapis.com", port: 443, path: "")

    public let host: String
    public let port: UInt16
    /// "" or "/…" without a trailing `/`.
    public let path: String

    public init(host: String, port: UInt16, path: String) {
        self.host = host
        self.port = port
        self.path = path
    }

    public init?(parsing text: String) {
        guard text.hasPrefix("https://"), text.utf8.count <= 512 else { return nil }
        var rest = Substring(text.dropFirst("https://".count))
        guard !rest.contains("@"), !rest.contains("?"), !rest.contains("#"),
            rest.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value < 0x7F })
        else { return nil }
        var path = ""
        if let slash = rest.firstIndex(of: "/") {
            path = String(rest[slash...])
            rest = rest[..<slash]
            while path.hasSuffix("/") { path.removeLast() }
        }
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
            host.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == ":" })
        else { return nil }
        var port: UInt16 = 443
        if let portText {
            guard let value = UInt16(portText), value > 0 else { return nil }
            port = value
        }
        self.init(host: String(host), port: port, path: path)
    }

    /// `host` or `host:port` for the `Host` header.
    public var authority: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        return self.port == 443 ? host : "\(host):\(self.port)"
    }

    public var description: String { "https://\(self.authority)\(self.path)" }
}
