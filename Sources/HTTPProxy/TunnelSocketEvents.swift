import GatewayIO

/// A tunnel socket's readiness, handed straight to the connection's relay
/// (`ProxyConnection.tunnelEvents`; `EventLoop.replaceHandler` at the 101).
///
/// The upstream's: before the tunnel its events go through `OutboundConnection` (connect, TLS
/// handshake), `UpstreamConnection` (pool state, response parsing) and the `UpstreamLessee`
/// protocol; once the connection left its pool for a tunnel none of them has anything left to
/// decide, and the detour cost about 230 instructions and 6 reference counts per echoed message
/// (two existential calls, an unowned load). The client's (plain TCP only): `handleEvents`
/// checks for HTTP/2 and for a reset before a response, neither of which applies to a tunnel.
/// The client's deadline still goes to the connection (the tunnel's idle and lifetime timer);
/// the upstream's token has none once it is open (`OutboundConnection` cleared its connect
/// deadline, and `OutboundConnection.handleDeadline` does nothing for an open connection).
/// docs/design-notes.md "What one echoed message costs".
///
/// Holds the connection strongly: the registration ends when the tunnel does (`endTunnel`
/// closes both sockets, which deregisters them and drops this handler), so the cycle
/// connection → socket → handler → connection is broken there.
///
/// Confined to the connection's loop.
final class TunnelSocketEvents: EventHandler {
    private let connection: ProxyConnection
    private let channel: SocketChannel
    /// The client's socket: its deadline is the tunnel's.
    private let carriesDeadline: Bool

    init(connection: ProxyConnection, channel: SocketChannel, carriesDeadline: Bool) {
        self.connection = connection
        self.channel = channel
        self.carriesDeadline = carriesDeadline
    }

    func handleEvents(_ events: UInt32) {
        self.channel.noteEvents(events)
        self.connection.tunnelEvents()
    }

    func handleDeadline() {
        if self.carriesDeadline { self.connection.handleDeadline() }
    }
}

@available(*, unavailable)
extension TunnelSocketEvents: Sendable {}
