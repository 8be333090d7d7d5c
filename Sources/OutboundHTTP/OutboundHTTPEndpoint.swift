/// Where one call of the outbound client goes: TLS host and port, the `Host` header, and the
/// path. The scheme is always https. Each service builds its own (`AppleClient`'s
/// `deviceCheck`/`attestationData`, Google's from a URL or a `GoogleEndpoint`).
public struct OutboundHTTPEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// Host to connect to and to name in SNI and `Host`.
    public var host: String
    public var port: UInt16
    /// Absolute path, e.g. `/v1/query_two_bits`.
    public var path: String

    public init(host: String, port: UInt16 = 443, path: String) {
        self.host = host
        self.port = port
        self.path = path
    }

    /// Parses `https://host[:port]/path[?query]` (a path is required; `/` at least; the origin
    /// as `OutboundOrigin` reads it), e.g. Google's status list (`android.revocation.url`). nil
    /// for another scheme, user information, a fragment, a bad port, control bytes or spaces.
    public init?(url text: String) {
        guard text.hasPrefix("https://"), text.utf8.count <= 2048,
            text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }), !text.contains("#")
        else { return nil }
        let rest = text.dropFirst("https://".count)
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        guard let server = OutboundOrigin(parsing: "https://" + rest[..<slash]) else { return nil }
        self.init(host: server.host, port: server.port, path: String(rest[slash...]))
    }

    /// The `Host` header: the port only when it is not https' default.
    public var hostHeader: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        return self.port == 443 ? host : "\(host):\(self.port)"
    }

    public var description: String { "https://\(self.hostHeader)\(self.path)" }
}
