private import CGatewayShims
import GatewayIO
import Glibc

/// The readiness of one end of an `InMemoryStreamEnd` pair: an eventfd, which the end's owner
/// registers with its event loop as it would a socket. Every `signal` is a new edge for
/// edge-triggered epoll (each write to an eventfd wakes its waiters, whatever the counter held),
/// and an eventfd always polls writable, so the EPOLLOUT a waiting writer asked for comes with
/// the next signal.
enum InMemoryReadiness {
    static func make() throws(IOError) -> Int32 {
        let fd = CGatewayShims_eventfd()
        guard fd >= 0 else { throw IOError("eventfd", errno: errno) }
        return fd
    }

    /// An edge for the owner of `fd`, and readable until `clear`.
    static func signal(_ fd: Int32) {
        var one: UInt64 = 1
        _ = Glibc.write(fd, &one, MemoryLayout<UInt64>.size)
    }

    /// Not readable any more: a later `signal` is an edge that epoll reports with EPOLLIN set.
    static func clear(_ fd: Int32) {
        var count: UInt64 = 0
        _ = Glibc.read(fd, &count, MemoryLayout<UInt64>.size)
    }

    static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }
}
