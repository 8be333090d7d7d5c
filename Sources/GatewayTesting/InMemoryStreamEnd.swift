package import GatewayIO
import Synchronization

/// One end of an in-memory duplex stream: a `ByteTransport` that needs no socket, so a
/// `ProxyConnection` or an `UpstreamConnection` runs on the real event loop over it, and a test
/// drives the other end (`InMemoryHTTPPeer`). `fd` is an eventfd that the peer's writes and
/// closes signal (`InMemoryReadiness`); the loop registers it as it would a socket.
///
/// What a socket does and this does too: reads give what was written, in order, then the end of
/// the stream once the peer shut down its output or closed; writes take what fits in the
/// `capacity` given to `pair` and return `.wouldBlock` when full; a write after the peer closed
/// fails with EPIPE. No EPOLLRDHUP or EPOLLHUP is ever reported: `drained` stays false while an
/// end of stream is pending, so the owner reads on until it sees it.
///
/// Thread-safe: the loop uses one end while a test uses the other.
package final class InMemoryStreamEnd: ByteTransport, Sendable {
    package let fd: Int32
    private let inbound: InMemoryByteQueue
    private let outbound: InMemoryByteQueue
    private let isClosed = Atomic<Bool>(false)

    private init(fd: Int32, inbound: InMemoryByteQueue, outbound: InMemoryByteQueue) {
        self.fd = fd
        self.inbound = inbound
        self.outbound = outbound
    }

    /// Two connected ends; each direction holds at most `capacity` unread bytes.
    package static func pair(capacity: Int = 4 * 1024 * 1024) throws(IOError) -> (InMemoryStreamEnd, InMemoryStreamEnd)
    {
        let first = try InMemoryReadiness.make()
        let second: Int32
        do {
            second = try InMemoryReadiness.make()
        } catch {
            InMemoryReadiness.close(first)
            throw error
        }
        let firstToSecond = InMemoryByteQueue(capacity: capacity, readerFD: second, writerFD: first)
        let secondToFirst = InMemoryByteQueue(capacity: capacity, readerFD: first, writerFD: second)
        return (
            InMemoryStreamEnd(fd: first, inbound: secondToFirst, outbound: firstToSecond),
            InMemoryStreamEnd(fd: second, inbound: firstToSecond, outbound: secondToFirst)
        )
    }

    /// Bytes the peer wrote that this end has not read.
    package var unreadCount: Int { self.inbound.count }

    /// This end was closed (by its owner: the proxy closes its ends when it is done with them).
    package var closed: Bool { self.isClosed.load(ordering: .acquiring) }

    // MARK: - ByteTransport

    package func read(into pointer: UnsafeMutableRawPointer, count: Int) throws(TransportError) -> IOResult {
        try self.inbound.read(into: pointer, count: count)
    }

    package func write(_ pointer: UnsafeRawPointer, count: Int) throws(TransportError) -> IOResult {
        guard count > 0 else { return .processed(0) }
        return try self.outbound.write(pointer, count: count)
    }

    package func drained(afterReading count: Int, of requested: Int) -> Bool {
        self.inbound.isDrained
    }

    package var waitsForWritable: Bool { false }
    package var isHandshaking: Bool { false }

    package func shutdownOutput() {
        self.outbound.finishWriting()
    }

    package func close() {
        guard !self.isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        self.inbound.readerClosed()
        self.outbound.writerClosed()
        InMemoryReadiness.close(self.fd)
    }

    deinit {
        self.close()
    }
}
