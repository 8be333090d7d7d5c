public import OutboundHTTP

/// Apple's two hosts as endpoints of the outbound client. Apple's URLs are fixed per
/// environment; an `OutboundOrigin` (policy `apple.devicecheck_url`, `apple.attest_data_url`)
/// replaces host and port for both environments, so that one local fake server or an egress
/// proxy serves them.
extension OutboundHTTPEndpoint {
    /// `POST /v1/<operation>` on DeviceCheck's host.
    public static func deviceCheck(
        _ operation: DeviceCheckOperation,
        environment: AppleEnvironment,
        override: OutboundOrigin? = nil
    ) -> OutboundHTTPEndpoint {
        let path = "/v1/\(operation.rawValue)"
        if let override { return OutboundHTTPEndpoint(host: override.host, port: override.port, path: path) }
        return OutboundHTTPEndpoint(host: environment.deviceCheckHost, path: path)
    }

    /// `POST /v1/attestationData` on the fraud-risk receipt host.
    public static func attestationData(
        environment: AppleEnvironment,
        override: OutboundOrigin? = nil
    ) -> OutboundHTTPEndpoint {
        let path = "/v1/attestationData"
        if let override { return OutboundHTTPEndpoint(host: override.host, port: override.port, path: path) }
        return OutboundHTTPEndpoint(host: environment.attestDataHost, path: path)
    }
}
