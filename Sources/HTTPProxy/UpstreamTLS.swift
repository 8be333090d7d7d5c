package import GatewayIO
import Synchronization

/// An `https://` upstream's TLS: the client context its new connections take (built from the
/// policy at start, rebuilt by every reload, swapped whole; pooled connections keep the
/// context they were made with) and what each connection checks: the server name (SNI and
/// the certificate's name) and the port (with the name, the key of the session cache).
package final class UpstreamTLS: Sendable {
    package let serverName: String
    package let port: Int
    private let current: Mutex<TLSClientContext>

    package init(context: TLSClientContext, serverName: String, port: Int) {
        self.current = Mutex(context)
        self.serverName = serverName
        self.port = port
    }

    package var context: TLSClientContext { self.current.withLock { $0 } }

    /// A reload built a new context: connections opened from now on use it.
    package func replace(_ context: TLSClientContext) {
        self.current.withLock { $0 = context }
    }

    /// What a new connection speaks: the current context, the name and the port.
    var outbound: OutboundTLS {
        OutboundTLS(context: self.context, serverName: self.serverName, port: self.port)
    }
}
