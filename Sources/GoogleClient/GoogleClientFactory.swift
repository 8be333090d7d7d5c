package import GatewayIO
package import OutboundHTTP

/// The outbound HTTPS client for Google's hosts: OutboundHTTP's client (keep-alive connections
/// per loop, TLS verified against the system store or `ca_file`, breaker, optional token
/// bucket, timeouts) as `OutboundPeer.google`, without a token source: its metrics are
/// `attest_gateway_google_*`, its failures `google_*` (`google_unreachable`, `google_timeout`,
/// …). A request names its own credential (`OutboundHTTPRequest.Credential`: `.none` for the
/// public status list, `.bearer` for an OAuth access token) and its `service` label.
package enum GoogleClientFactory {
    /// Default bound of an answer body: the status list's (`AndroidRevocationList.maximumSize`).
    package static let defaultMaximumBodyBytes = 32 * 1024 * 1024

    /// - Parameters:
    ///   - caFile: PEM roots trusted for Google's hosts instead of the system store (a local
    ///     fake, an egress proxy); nil = the system's roots.
    ///   - requestsPerSecond: a global rate limit of this client; nil = none.
    ///   - breaker: the circuit breaker's thresholds (`OutboundCircuitBreaker`).
    package static func make(
        loops: [EventLoop], caFile: String?, registry: MetricsRegistry,
        requestsPerSecond: Int? = nil,
        breaker: OutboundCircuitBreaker = OutboundCircuitBreaker(),
        maximumBodyBytes: Int = GoogleClientFactory.defaultMaximumBodyBytes
    ) throws(OutboundHTTPError) -> OutboundHTTPClient {
        try OutboundHTTPClient(
            loops: loops, tokens: nil, caFile: caFile,
            metrics: OutboundClientMetrics(registry: registry, peer: .google),
            requestsPerSecond: requestsPerSecond, breaker: breaker, maximumBodyBytes: maximumBodyBytes)
    }
}
