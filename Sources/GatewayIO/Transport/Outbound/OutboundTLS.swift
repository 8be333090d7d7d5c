/// The TLS a new outbound socket speaks once connected: the client context (trust anchors,
/// client certificate, session cache) and the name the server's certificate must carry,
/// with the port completing the session cache's key.
package struct OutboundTLS: Sendable {
    package let context: TLSClientContext
    package let serverName: String
    package let port: Int

    package init(context: TLSClientContext, serverName: String, port: Int) {
        self.context = context
        self.serverName = serverName
        self.port = port
    }

    /// The client session over `fd`, a socket whose connect completed.
    package func transport(for fd: Int32) throws(TransportError) -> TLSTransport {
        try TLSTransport(fd: fd, client: self.context, serverName: self.serverName, port: self.port)
    }
}
