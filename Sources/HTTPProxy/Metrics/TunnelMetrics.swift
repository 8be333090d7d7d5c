package import GatewayIO

/// WebSocket tunnels (`websocket: true` routes, after the upstream's 101), so an operator sees
/// how many are open, what flows through them, and why they end:
///
/// - `attest_gateway_tunnels_open`: tunnels open now (each is also one of
///   `attest_gateway_active_connections`).
/// - `attest_gateway_tunnel_bytes_total{direction}`: bytes relayed, `client_to_upstream` or
///   `upstream_to_client` (counted as they move, not at close).
/// - `attest_gateway_tunnels_closed_total{reason}`: one of `TunnelStateMachine.CloseReason`.
package final class TunnelMetrics: Sendable {
    package let open: Gauge
    package let bytesFromClient: Counter
    package let bytesFromUpstream: Counter
    private let closes: [TunnelStateMachine.CloseReason: Counter]

    package init(registry: MetricsRegistry) {
        self.open = registry.gauge(
            "attest_gateway_tunnels_open", help: "WebSocket tunnels open now."
        ).labels()
        let bytes = registry.counter(
            "attest_gateway_tunnel_bytes_total", help: "Bytes relayed through WebSocket tunnels, by direction.",
            labelNames: ["direction"])
        self.bytesFromClient = bytes.labels("client_to_upstream")
        self.bytesFromUpstream = bytes.labels("upstream_to_client")
        let closes = registry.counter(
            "attest_gateway_tunnels_closed_total", help: "WebSocket tunnels closed, by reason.",
            labelNames: ["reason"])
        // Every reason exists from the start: a dashboard's rate() sees the first close too.
        var children: [TunnelStateMachine.CloseReason: Counter] = [:]
        for reason in TunnelStateMachine.CloseReason.allCases { children[reason] = closes.labels(reason.rawValue) }
        self.closes = children
    }

    package func closed(_ reason: TunnelStateMachine.CloseReason) {
        self.closes[reason]?.increment()
    }

    /// Tunnels closed so far for `reason`.
    package func closedCount(_ reason: TunnelStateMachine.CloseReason) -> UInt64 {
        self.closes[reason]?.value64 ?? 0
    }
}
