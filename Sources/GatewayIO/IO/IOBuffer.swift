import Glibc

/// A growable byte buffer with a read index: bytes are appended at the end and
/// consumed from the front. Used for the partial data a connection must keep (an
/// unfinished head, a paused body, unsent output); it is never shared between queues and
/// no method re-enters another, so its fields skip the runtime's dynamic exclusivity checks.
package final class IOBuffer {
    @exclusivity(unchecked) private var storage: UnsafeMutableRawPointer
    @exclusivity(unchecked) package private(set) var capacity: Int
    @exclusivity(unchecked) private var readerIndex = 0
    @exclusivity(unchecked) private var writerIndex = 0

    package init(capacity: Int = 4096) {
        self.capacity = max(capacity, 64)
        self.storage = .allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit {
        self.storage.deallocate()
    }

    @inlinable
    package var readableCount: Int { self.writerIndex - self.readerIndex }
    @inlinable
    package var isEmpty: Bool { self.writerIndex == self.readerIndex }

    package var readableBytes: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: self.storage + self.readerIndex, count: self.readableCount)
    }

    package func consume(_ count: Int) {
        precondition(count <= self.readableCount)
        self.readerIndex += count
        if self.readerIndex == self.writerIndex {
            self.readerIndex = 0
            self.writerIndex = 0
        }
    }

    package func clear() {
        self.readerIndex = 0
        self.writerIndex = 0
    }

    /// When empty, gives back storage beyond `limit` bytes: a large body went through a buffer
    /// that lives on (a pooled upstream connection), and must not hold that much for good.
    package func shrink(toCapacity limit: Int) {
        guard self.isEmpty, self.capacity > limit else { return }
        self.storage.deallocate()
        self.capacity = max(limit, 64)
        self.storage = .allocate(byteCount: self.capacity, alignment: 16)
        self.readerIndex = 0
        self.writerIndex = 0
    }

    /// Makes room for at least `count` more bytes at the end (compacting first).
    package func reserveWritable(_ count: Int) {
        if self.capacity - self.writerIndex >= count { return }
        let live = self.readableCount
        if self.readerIndex > 0 {
            memmove(self.storage, self.storage + self.readerIndex, live)
            self.readerIndex = 0
            self.writerIndex = live
            if self.capacity - self.writerIndex >= count { return }
        }
        var newCapacity = self.capacity
        while newCapacity - live < count { newCapacity *= 2 }
        let newStorage = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        newStorage.copyMemory(from: self.storage, byteCount: live)
        self.storage.deallocate()
        self.storage = newStorage
        self.capacity = newCapacity
    }

    package var writableCount: Int { self.capacity - self.writerIndex }

    package var writablePointer: UnsafeMutableRawPointer { self.storage + self.writerIndex }

    package func didWrite(_ count: Int) {
        precondition(self.writerIndex + count <= self.capacity)
        self.writerIndex += count
    }

    package func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0, let base = bytes.baseAddress else { return }
        self.reserveWritable(bytes.count)
        (self.storage + self.writerIndex).copyMemory(from: base, byteCount: bytes.count)
        self.writerIndex += bytes.count
    }

    package func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { self.append($0) }
    }
}

@available(*, unavailable)
extension IOBuffer: Sendable {}
