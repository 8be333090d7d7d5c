private import Glibc

/// Plain TCP: `recv(2)` and `send(2)` on the socket.
package final class PlainTransport: ByteTransport {
    package let fd: Int32
    private var isClosed = false

    package init(fd: Int32) {
        self.fd = fd
    }

    @inline(__always)
    package func read(into pointer: UnsafeMutableRawPointer, count: Int) throws(TransportError) -> IOResult {
        try Self.read(self.fd, into: pointer, count: count)
    }

    @inline(__always)
    package func write(_ pointer: UnsafeRawPointer, count: Int) throws(TransportError) -> IOResult {
        try Self.write(self.fd, pointer, count: count)
    }

    @inline(__always)
    package func drained(afterReading count: Int, of requested: Int) -> Bool {
        Self.drained(afterReading: count, of: requested)
    }

    // The same on a bare descriptor: `SocketChannel` calls these directly for a plain socket
    // (no existential call, no retain and release of its `transport` per read and write).

    @inline(__always)
    static func read(_ fd: Int32, into pointer: UnsafeMutableRawPointer, count: Int) throws(TransportError)
        -> IOResult
    {
        do {
            return try SystemCalls.receive(fd, into: pointer, count: count)
        } catch {
            throw .system(error)
        }
    }

    @inline(__always)
    static func write(_ fd: Int32, _ pointer: UnsafeRawPointer, count: Int) throws(TransportError) -> IOResult {
        do {
            return try SystemCalls.write(fd, pointer, count: count)
        } catch {
            throw .system(error)
        }
    }

    /// A short read drained the socket.
    @inline(__always)
    static func drained(afterReading count: Int, of requested: Int) -> Bool { count < requested }
    package var waitsForWritable: Bool { false }
    package var isHandshaking: Bool { false }

    package func shutdownOutput() {
        shutdown(self.fd, Int32(SHUT_WR))
    }

    package func close() {
        guard !self.isClosed else { return }
        self.isClosed = true
        SystemCalls.close(self.fd)
    }
}

@available(*, unavailable)
extension PlainTransport: Sendable {}
