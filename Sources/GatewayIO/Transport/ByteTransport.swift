/// The byte stream under one side of a proxied exchange: plain TCP (`PlainTransport`), or
/// TLS over TCP. Connections (`ProxyConnection` on the client side, `UpstreamConnection` on
/// the upstream side) own their socket's epoll registration, buffers and back-pressure; the
/// transport only moves bytes, so TLS plugs in here without the connections knowing.
///
/// Every call is non-blocking and made on the owner's loop. `.wouldBlock` means: wait for the
/// next readiness edge; `waitsForWritable` says which one (a TLS read may need to write a
/// handshake message first, and a TLS write may need to read).
package protocol ByteTransport: AnyObject {
    /// The socket (registered with the loop by the owner).
    var fd: Int32 { get }

    /// One read into `pointer` (up to `count` bytes): `.processed(n)` with `n > 0` bytes of
    /// application data, `.wouldBlock`, or `.endOfFile` when the peer closed its side.
    func read(into pointer: UnsafeMutableRawPointer, count: Int) throws(TransportError) -> IOResult

    /// One write of up to `count` bytes from `pointer`: `.processed(n)` or `.wouldBlock`.
    func write(_ pointer: UnsafeRawPointer, count: Int) throws(TransportError) -> IOResult

    /// Called right after a read that gave `count` bytes of the `requested`: whether it left
    /// nothing in the socket or the transport, so the next data brings a new epoll edge and
    /// the owner can skip the read that would only find the socket empty. Plain TCP: a short
    /// read. TLS: the socket's last read came back short and OpenSSL buffers nothing (a short
    /// read of plaintext proves nothing: a whole record may wait behind the one decrypted).
    func drained(afterReading count: Int, of requested: Int) -> Bool

    /// After the last `.wouldBlock`: the transport waits for the socket to become writable
    /// (TLS handshake or alert output), whatever the call was.
    var waitsForWritable: Bool { get }

    /// Still before the first application byte can flow (TLS handshake); plain TCP: false.
    var isHandshaking: Bool { get }

    /// Ends our sending side after what was written: TLS sends close_notify, then TCP
    /// `shutdown(SHUT_WR)`. The read side stays open (lingering close).
    func shutdownOutput()

    /// Releases the socket and any session state. Idempotent.
    func close()
}

/// Why a transport call failed: the socket (errno) or the TLS layer (a reason for the log).
package enum TransportError: Error, Hashable, CustomStringConvertible {
    case system(IOError)
    /// TLS failed: `reason` is OpenSSL's error text or the check that failed (for the log).
    case tls(reason: String)

    package var description: String {
        switch self {
        case .system(let error): error.description
        case .tls(let reason): "TLS: \(reason)"
        }
    }
}
