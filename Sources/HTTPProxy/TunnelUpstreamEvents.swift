import GatewayIO

/// The upstream socket's readiness while it carries a tunnel, handed straight to the
/// connection's pump (`EventLoop.replaceHandler` at the 101).
///
/// Before the tunnel the events go through `OutboundConnection` (connect, TLS handshake),
/// `UpstreamConnection` (pool state, response parsing) and the `UpstreamLessee` protocol; once
/// the connection left its pool for a tunnel none of them has anything left to decide, and the
/// detour cost about 230 instructions and 6 reference counts per echoed message (two
/// existential calls, an unowned load; docs/design-notes.md "What one echoed message costs").
///
/// Holds the connection strongly: the registration ends when the tunnel does (`endTunnel`
/// closes the upstream socket, which deregisters it and drops this handler), so the cycle
/// connection → tunnel → socket → handler → connection is broken there.
///
/// Confined to the connection's loop.
final class TunnelUpstreamEvents: EventHandler {
    private let connection: ProxyConnection
    private let channel: SocketChannel

    init(connection: ProxyConnection, channel: SocketChannel) {
        self.connection = connection
        self.channel = channel
    }

    func handleEvents(_ events: UInt32) {
        self.channel.noteEvents(events)
        self.connection.pump()
    }

    /// The upstream's token has no deadline once it is open (`OutboundConnection` cleared its
    /// connect deadline; the tunnel's deadlines are on the client's token): nothing to do, as
    /// `OutboundConnection.handleDeadline` does nothing for an open connection.
    func handleDeadline() {}
}

@available(*, unavailable)
extension TunnelUpstreamEvents: Sendable {}
