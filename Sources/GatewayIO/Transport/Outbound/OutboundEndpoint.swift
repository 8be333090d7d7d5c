import Glibc

/// Where an outbound socket connects: a resolved TCP address, or a Unix socket path (a
/// local Redis). Names are resolved before this point: getaddrinfo blocks, and a connect
/// runs on a loop or a connection's queue.
package enum OutboundEndpoint: Sendable, CustomStringConvertible {
    case tcp(SocketAddress)
    case unix(path: String)

    package var description: String {
        switch self {
        case .tcp(let address): address.description
        case .unix(let path): path
        }
    }

    /// A non-blocking, close-on-exec socket with its connect started. `connected`: the connect
    /// finished at once (loopback can); otherwise writability or SO_ERROR tells the outcome.
    /// The socket is closed again when the connect fails at once.
    package func openSocket() throws(IOError) -> (fd: Int32, connected: Bool) {
        switch self {
        case .tcp(let address):
            let fd = try SystemCalls.makeSocket(family: address.family)
            SystemCalls.setNoDelay(fd)
            do throws(IOError) {
                return (fd, try SystemCalls.connect(fd, to: address))
            } catch {
                SystemCalls.close(fd)
                throw error
            }
        case .unix(let path):
            let fd = try SystemCalls.makeSocket(family: AF_UNIX)
            do throws(IOError) {
                return (fd, try Self.connectUnix(fd, path: path))
            } catch {
                SystemCalls.close(fd)
                throw error
            }
        }
    }

    private static func connectUnix(_ fd: Int32, path: String) throws(IOError) -> Bool {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw IOError(
                "connect (socket path longer than \(MemoryLayout.size(ofValue: address.sun_path) - 1) bytes)",
                errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if rc == 0 { return true }
        let err = Glibc.errno
        // A Unix connect does not go "in progress"; EAGAIN means the listen backlog is full.
        if err == EINPROGRESS || err == EINTR { return false }
        throw IOError("connect", errno: err)
    }
}
