/// Where one call goes (Apple's servers, or another host of the outbound client): TLS host and
/// port, the `Host` header, and the path.
///
/// Apple's URLs are fixed per environment; `AppleServerOverride` (policy `apple.devicecheck_url`,
/// `apple.attest_data_url`) replaces host and port for both environments, so that one local
/// fake server or an egress proxy serves them. The scheme is always https.
public struct AppleEndpoint: Sendable, Hashable, CustomStringConvertible {
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

    /// Parses `https://host[:port]/path[?query]` (a path is required; `/` at least): another
    /// host's URL for the same client (Google's status list, `android.revocation.url`). nil
    /// for another scheme, user information, a fragment, a bad port, control bytes or spaces.
    public init?(url text: String) {
        guard text.hasPrefix("https://"), text.utf8.count <= 2048,
            text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }), !text.contains("#")
        else { return nil }
        let rest = text.dropFirst("https://".count)
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        guard let server = AppleServerOverride(parsing: "https://" + rest[..<slash]) else { return nil }
        self.init(host: server.host, port: server.port, path: String(rest[slash...]))
    }

    /// The `Host` header: the port only when it is not https' default.
    public var hostHeader: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        return self.port == 443 ? host : "\(host):\(self.port)"
    }

    public var description: String { "https://\(self.hostHeader)\(self.path)" }

    /// `POST /v1/<operation>` on DeviceCheck's host.
    public static func deviceCheck(
        _ operation: DeviceCheckOperation,
        environment: AppleEnvironment,
        override: AppleServerOverride? = nil
    ) -> AppleEndpoint {
        let path = "/v1/\(operation.rawValue)"
        if let override { return AppleEndpoint(host: override.host, port: override.port, path: path) }
        return AppleEndpoint(host: environment.deviceCheckHost, path: path)
    }

    /// `POST /v1/attestationData` on the fraud-risk receipt host.
    public static func attestationData(
        environment: AppleEnvironment,
        override: AppleServerOverride? = nil
    ) -> AppleEndpoint {
        let path = "/v1/attestationData"
        if let override { return AppleEndpoint(host: override.host, port: override.port, path: path) }
        return AppleEndpoint(host: environment.attestDataHost, path: path)
    }
}
