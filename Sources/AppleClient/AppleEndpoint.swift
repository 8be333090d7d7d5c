/// Where one call to Apple goes: TLS host and port, the `Host` header, and the path.
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
