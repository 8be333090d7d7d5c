import Verification

/// An https origin, `https://host[:port]`: what replaces a service's host (tests, egress
/// proxies; policy `apple.devicecheck_url` / `apple.attest_data_url`), and the origin part of
/// every URL the outbound client is given (`OutboundHTTPEndpoint(url:)`).
public struct OutboundOrigin: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16 = 443) {
        self.host = host
        self.port = port
    }

    /// Parses `https://host[:port]` (an optional trailing `/`); IPv6 literals in brackets.
    /// nil for another scheme, a path, user information, a query, a fragment, a bad port,
    /// spaces or control bytes, or more than 512 bytes.
    ///
    /// One parser for "an https origin" in the gateway: `GoogleEndpoint(parsing:)`
    /// (Verification, pure, below this module; Play Integrity's `token_uri` and `api_url` use it
    /// with a path), here without one.
    public init?(parsing text: String) {
        guard let parsed = GoogleEndpoint(parsing: text), parsed.path.isEmpty else { return nil }
        self.host = parsed.host
        self.port = parsed.port
    }

    public var description: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        return self.port == 443 ? "https://\(host)" : "https://\(host):\(self.port)"
    }
}
