/// `tunnels:`: how long a WebSocket tunnel (a route with `websocket: true`, after the upstream's
/// 101) may stay open. The gateway judges the upgrade request once; everything after it is bytes
/// it relays without looking, so these bounds are what limits what one judged request buys.
///
/// ```yaml
/// tunnels:
///   idle_timeout: 5m     # no byte either way for this long: closed (1s-24h)
///   max_lifetime: 1h     # closed this long after the upgrade, busy or not (1s-24h)
/// ```
///
/// - `idle_timeout` (default 5 minutes): silence in both directions; a byte either way
///   restarts it. nginx closes a proxied WebSocket after `proxy_read_timeout` (60 s) of
///   silence; mobile apps that ping every 30-60 s fit under 5 minutes with room to spare.
/// - `max_lifetime` (default 1 hour): a tunnel never outlives it, so a revoked key or a
///   changed route (a reload does not cut open tunnels) stops reaching the upstream within an
///   hour; the app reconnects with a fresh assertion.
public struct TunnelPolicy: Sendable, Hashable {
    public var idleTimeout: Duration
    public var maxLifetime: Duration

    /// Bounds of both settings: under a second a tunnel cannot survive one mobile round trip;
    /// beyond a day a judged upgrade is worth more than any assertion should be.
    public static let range = Duration.seconds(1)...Duration.seconds(86_400)

    public init(idleTimeout: Duration = .seconds(300), maxLifetime: Duration = .seconds(3600)) {
        self.idleTimeout = idleTimeout
        self.maxLifetime = maxLifetime
    }
}
