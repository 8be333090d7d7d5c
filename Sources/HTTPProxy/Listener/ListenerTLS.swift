package import GatewayIO
import PolicyModel
import Synchronization

/// A listener's TLS: the server context its new connections take (swapped whole by a
/// certificate reload; live connections keep the context they started with) and the
/// handshake's time limit.
package final class ListenerTLS: Sendable {
    private let current: Mutex<TLSServerContext>
    /// A connection whose handshake is not done by then is closed (counted as `timeout`).
    package let handshakeTimeout: Duration
    /// The header that carries a verified client certificate's subject upstream
    /// (`tls.client_subject_header`). Without a verified certificate it is absent (and a
    /// client's copy is always removed).
    package let clientSubjectHeader: String

    package init(
        context: TLSServerContext, handshakeTimeout: Duration,
        clientSubjectHeader: String = ListenerTLSConfiguration.defaultClientSubjectHeader
    ) {
        self.current = Mutex(context)
        self.handshakeTimeout = handshakeTimeout
        self.clientSubjectHeader = clientSubjectHeader
    }

    package var context: TLSServerContext { self.current.withLock { $0 } }

    /// A reload built a new context: connections accepted from now on use it.
    package func replace(_ context: TLSServerContext) {
        self.current.withLock { $0 = context }
    }

    /// The transport for a just-accepted socket.
    func transport(for fd: Int32) throws(TransportError) -> TLSTransport {
        try TLSTransport(fd: fd, server: self.context)
    }
}
