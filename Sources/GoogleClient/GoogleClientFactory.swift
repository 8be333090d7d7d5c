package import AppleClient
package import GatewayIO

/// The outbound HTTPS client for Google's hosts: the same `AppleHTTPClient` Apple's calls use
/// (keep-alive connections per loop, TLS verified against the system store or `ca_file`,
/// breaker, optional token bucket, timeouts), built without Apple's JWT cache, its metrics
/// named `attest_gateway_google_*`. A request names its own credential
/// (`AppleHTTPRequest.Credential`: `.none` for the public status list, `.bearer` for an OAuth
/// access token) and its `service` label.
package enum GoogleClientFactory {
    /// Default bound of an answer body: the status list's (`AndroidRevocationList.maximumSize`).
    package static let defaultMaximumBodyBytes = 32 * 1024 * 1024

    /// - Parameters:
    ///   - caFile: PEM roots trusted for Google's hosts instead of the system store (a local
    ///     fake, an egress proxy); nil = the system's roots.
    ///   - requestsPerSecond: a global rate limit of this client; nil = none.
    ///   - breaker: the circuit breaker's thresholds (`AppleCircuitBreaker`).
    package static func make(
        loops: [EventLoop], caFile: String?, registry: MetricsRegistry,
        requestsPerSecond: Int? = nil,
        breaker: AppleCircuitBreaker = AppleCircuitBreaker(),
        maximumBodyBytes: Int = GoogleClientFactory.defaultMaximumBodyBytes
    ) throws(AppleError) -> AppleHTTPClient {
        try AppleHTTPClient(
            loops: loops, jwt: nil, caFile: caFile, metrics: AppleClientMetrics(registry: registry, peer: "google"),
            requestsPerSecond: requestsPerSecond, breaker: breaker, maximumBodyBytes: maximumBodyBytes)
    }
}
