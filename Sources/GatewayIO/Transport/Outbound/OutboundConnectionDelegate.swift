/// The owner of an `OutboundConnection`: the protocol spoken over it (HTTP/1.1 to an
/// upstream or to Apple). Called on the connection's loop.
package protocol OutboundConnectionDelegate: AnyObject {
    /// The connect completed; with TLS, the handshake starts now. Bytes queued from here on
    /// go out once the connection is open.
    func outboundConnected(_ connection: OutboundConnection)
    /// Application bytes can flow (after the handshake, with TLS).
    func outboundOpened(_ connection: OutboundConnection)
    /// Readiness on an open connection: the owner reads and flushes through `channel`.
    func outboundEvents(_ connection: OutboundConnection, _ events: UInt32)
    /// The connection closed itself before it opened (connect, handshake, deadline); the
    /// socket is gone already.
    func outboundFailed(_ connection: OutboundConnection, _ reason: OutboundCloseReason)
}

extension OutboundConnectionDelegate {
    package func outboundConnected(_ connection: OutboundConnection) {}
}
