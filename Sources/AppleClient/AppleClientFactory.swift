package import GatewayIO

/// Builds the HTTPS client to Apple from the policy's `apple:` block: the JWT signer from
/// `private_key_file`, TLS trust from `ca_file` (or the system store), the global rate limit
/// from `fraud_risk.requests_per_second` (DeviceCheck and refreshes share it).
package enum AppleClientFactory {
    package static func make(
        _ configuration: AppleConfiguration, loops: [EventLoop], metrics: AppleClientMetrics,
        rateLimited: Bool = true
    ) throws(AppleError) -> AppleHTTPClient {
        let signer = try AppleJWT.load(
            teamID: configuration.teamID, keyID: configuration.keyID, privateKeyFile: configuration.privateKeyFile)
        return try AppleHTTPClient(
            loops: loops, jwt: AppleJWTCache(signer: signer), caFile: configuration.caFile, metrics: metrics,
            requestsPerSecond: rateLimited ? configuration.fraudRisk.requestsPerSecond : nil)
    }
}
