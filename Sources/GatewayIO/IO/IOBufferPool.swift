/// A loop's spare `IOBuffer`s: a connection takes one only while it holds partial input or
/// unsent output, so idle keep-alive connections own no buffer memory. Confined to its loop.
package final class IOBufferPool {
    /// Capacity of a new buffer.
    static let bufferCapacity = 16 * 1024
    /// Buffers kept at most; larger buffers (a big body passed through) are freed instead.
    static let maxSpares = 64
    static let maxSpareCapacity = 256 * 1024

    @exclusivity(unchecked) private var spares: [IOBuffer] = []

    package init() {}

    package func take() -> IOBuffer {
        self.spares.popLast() ?? IOBuffer(capacity: Self.bufferCapacity)
    }

    package func give(_ buffer: IOBuffer) {
        buffer.clear()
        if self.spares.count < Self.maxSpares && buffer.capacity <= Self.maxSpareCapacity {
            self.spares.append(buffer)
        }
    }
}

@available(*, unavailable)
extension IOBufferPool: Sendable {}
