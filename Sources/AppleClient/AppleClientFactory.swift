package import GatewayIO
package import OutboundHTTP

/// Builds the outbound HTTPS client to Apple (`OutboundPeer.apple`) from the policy's `apple:`
/// block: the JWT signer from `private_key_file` (the client's token source), TLS trust from
/// `ca_file` (or the system store), the global rate limit from
/// `fraud_risk.requests_per_second` (DeviceCheck and refreshes share it).
package enum AppleClientFactory {
    package static func make(
        _ configuration: AppleConfiguration, loops: [EventLoop], metrics: OutboundClientMetrics,
        rateLimited: Bool = true
    ) throws(AppleError) -> OutboundHTTPClient {
        let signer = try AppleJWT.load(
            teamID: configuration.teamID, keyID: configuration.keyID, privateKeyFile: configuration.privateKeyFile)
        precondition(metrics.peer == .apple, "Apple's client counts as attest_gateway_apple_*")
        do {
            return try OutboundHTTPClient(
                loops: loops, tokens: AppleJWTCache(signer: signer), caFile: configuration.caFile, metrics: metrics,
                requestsPerSecond: rateLimited ? configuration.fraudRisk.requestsPerSecond : nil)
        } catch {
            throw AppleError(error)
        }
    }
}
