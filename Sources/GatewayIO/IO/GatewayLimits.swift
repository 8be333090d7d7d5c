/// Timeouts and limits of the proxy, modelled on nginx and Envoy defaults.
/// One value for the whole process; `policies.yaml` `limits:` overrides fields.
public struct GatewayLimits: Sendable, Hashable {
    /// Time to receive a complete request head (slowloris guard). nginx client_header_timeout: 60 s; default 10 s.
    public var headerReadTimeout: Duration = .seconds(10)
    /// Longest pause between two reads of a request body. nginx client_body_timeout: 60 s; default 30 s.
    public var bodyReadIdleTimeout: Duration = .seconds(30)
    /// Whole time, from the end of the request head, for a body the gateway buffers to verify
    /// (`enforce` / `monitor` routes, the endpoints); 408 beyond. Without it a client sending a
    /// byte per `bodyReadIdleTimeout` holds its share of `maxBufferedBodyBytes` forever. nginx
    /// has no total body timer; HAProxy `timeout http-request` covers head and body; Envoy's
    /// `request_timeout` (off by default) the whole request. Default 60 s: a 1 MiB body (the
    /// default route cap) still arrives at ~140 kbit/s. Streamed bodies are not bounded by it.
    public var bufferedBodyTimeout: Duration = .seconds(60)
    /// Upstream TCP connect. Envoy connect_timeout: 5 s.
    public var upstreamConnectTimeout: Duration = .seconds(5)
    /// Upstream response head after the request was sent. nginx proxy_read_timeout: 60 s.
    public var upstreamResponseTimeout: Duration = .seconds(60)
    /// Idle keep-alive client connection. nginx keepalive_timeout: 75 s; default 60 s.
    public var keepAliveIdleTimeout: Duration = .seconds(60)
    /// Open client connections; beyond it new ones are closed at accept.
    public var maxConnections: Int = 16_384
    /// Request line plus headers. 431 beyond. nginx large_client_header_buffers ~ 32 KiB; Envoy 60 KiB; default 16 KiB.
    public var maxHeaderBytes: Int = 16 * 1024
    /// Number of header fields. Envoy max_headers_count: 100.
    public var maxHeaderCount: Int = 100
    /// Time allowed for in-flight requests after SIGTERM.
    public var shutdownDrainTimeout: Duration = .seconds(20)
    /// Request bodies buffered for verification (`enforce` / `monitor` routes), summed over all
    /// connections; beyond it a request gets 503 `body_budget_exhausted`. nginx keeps at most
    /// client_body_buffer_size (16 KiB) per request in memory and spills the rest to disk; Envoy
    /// caps each connection's buffers at 1 MiB and has no global default (its overload manager
    /// must be configured). Default 64 MiB: 64 bodies at the default route cap of 1 MiB, or
    /// thousands of typical API bodies, well inside the 256 MiB memory limit of deploy/kubernetes.
    public var maxBufferedBodyBytes: Int = 64 * 1024 * 1024
    /// The share of `maxBufferedBodyBytes` one client address may hold at once (after
    /// `trusted_proxies`); beyond it that client gets 429 `rate_limited`, others are unaffected.
    /// Default 16 MiB: a quarter of the budget, sixteen 1 MiB bodies in flight from one address.
    public var maxBufferedBodyBytesPerAddress: Int = 16 * 1024 * 1024
    /// Open client connections from one peer address (IPv6: one /64); 0 = no cap (the default:
    /// behind a load balancer every connection comes from its few addresses). nginx limit_conn.
    public var maxConnectionsPerAddress: Int = 0
    /// Challenge and attest endpoint requests per second from one client address (token bucket
    /// refill rate). Default 20: an app needs one challenge per challenge-bound request; carrier
    /// NAT puts many devices behind one address, so size for the busiest shared address.
    public var challengeRatePerSecond: Int = 20
    /// Token bucket depth for `challengeRatePerSecond` (a burst from one address). Default 40.
    public var challengeBurst: Int = 40
    /// Time a store (Redis) command may take before the request gets the route's store-error
    /// answer. Default 250 ms: a Redis on the same network answers in well under 1 ms; raise it
    /// for a managed Redis across zones. Range 10 ms to 10 s.
    public var storeCommandTimeout: Duration = .milliseconds(250)

    public init() {}
}
