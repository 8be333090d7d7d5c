import GatewayIO
import Glibc
import Synchronization

/// One direction of an in-memory stream: the bytes written and not yet read, at most
/// `capacity`, and the readiness descriptors of its two ends.
///
/// Readiness follows the queue under its lock, so no edge is lost: a write signals the reader
/// after its bytes are in; the reader clears its descriptor only when it finds (or leaves) the
/// queue empty while the writer is still open, so a write that comes later is a new edge and
/// the end of the stream stays readable. A writer that found no room is signalled once the
/// reader makes some. An end's descriptor is dropped here, under the lock, before it is closed,
/// so a late signal never reaches a number the system gave to something else.
final class InMemoryByteQueue: Sendable {
    private struct State {
        var bytes: [UInt8] = []
        var head = 0
        /// The writer shut down or closed its end: the reader sees the end of the stream.
        var writerDone = false
        var readerClosed = false
        /// -1 once that end closed.
        var readerFD: Int32
        var writerFD: Int32
        /// A write found no room: the writer waits for an edge.
        var writerWaits = false

        var count: Int { self.bytes.count - self.head }
    }

    private let capacity: Int
    private let state: Mutex<State>

    init(capacity: Int, readerFD: Int32, writerFD: Int32) {
        self.capacity = capacity
        self.state = Mutex(State(readerFD: readerFD, writerFD: writerFD))
    }

    func read(into pointer: UnsafeMutableRawPointer, count: Int) throws(TransportError) -> IOResult {
        let result: Result<IOResult, TransportError> = self.state.withLock { state in
            if state.readerClosed { return .failure(.system(IOError("read", errno: EBADF))) }
            let available = state.count
            guard available > 0 else {
                if state.writerDone { return .success(.endOfFile) }
                InMemoryReadiness.clear(state.readerFD)
                return .success(.wouldBlock)
            }
            let n = min(count, available)
            state.bytes.withUnsafeBytes { bytes in
                pointer.copyMemory(from: bytes.baseAddress! + state.head, byteCount: n)
            }
            state.head += n
            if state.count == 0 {
                state.bytes.removeAll(keepingCapacity: true)
                state.head = 0
                if !state.writerDone { InMemoryReadiness.clear(state.readerFD) }
            } else if state.head > 64 * 1024 && state.head * 2 > state.bytes.count {
                state.bytes.removeFirst(state.head)
                state.head = 0
            }
            if state.writerWaits && state.writerFD >= 0 {
                state.writerWaits = false
                InMemoryReadiness.signal(state.writerFD)
            }
            return .success(.processed(n))
        }
        return try result.get()
    }

    /// Nothing left to read and no end of stream to report: the next write is a new edge.
    var isDrained: Bool {
        self.state.withLock { $0.count == 0 && !$0.writerDone }
    }

    /// Bytes waiting to be read.
    var count: Int {
        self.state.withLock { $0.count }
    }

    func write(_ pointer: UnsafeRawPointer, count: Int) throws(TransportError) -> IOResult {
        let result: Result<IOResult, TransportError> = self.state.withLock { state in
            if state.readerClosed || state.writerDone { return .failure(.system(IOError("write", errno: EPIPE))) }
            let room = self.capacity - state.count
            guard room > 0 else {
                state.writerWaits = true
                return .success(.wouldBlock)
            }
            let n = min(count, room)
            state.bytes.append(contentsOf: UnsafeRawBufferPointer(start: pointer, count: n))
            if state.readerFD >= 0 { InMemoryReadiness.signal(state.readerFD) }
            return .success(.processed(n))
        }
        return try result.get()
    }

    /// The writer sends no more: the reader reads what is left, then the end of the stream.
    func finishWriting() {
        self.state.withLock { state in
            guard !state.writerDone else { return }
            state.writerDone = true
            if state.readerFD >= 0 { InMemoryReadiness.signal(state.readerFD) }
        }
    }

    /// The writer's end closed: as `finishWriting`, and its descriptor is forgotten.
    func writerClosed() {
        self.finishWriting()
        self.state.withLock { $0.writerFD = -1 }
    }

    /// The reader's end closed: unread bytes are dropped and the writer's next write fails
    /// (EPIPE, as on a socket whose peer is gone); the writer gets an edge to find out.
    func readerClosed() {
        self.state.withLock { state in
            state.readerClosed = true
            state.readerFD = -1
            state.bytes = []
            state.head = 0
            if state.writerFD >= 0 { InMemoryReadiness.signal(state.writerFD) }
        }
    }
}
