/// One socket of a proxied exchange, seen through its transport: edge-triggered readiness,
/// reads into the loop's scratch memory (or the channel's own input once it holds partial
/// data), queued output flushed with back-pressure, write interest, half-close and close.
///
/// Both sides use it: `ProxyConnection` for the client, `UpstreamConnection` for the
/// upstream. Whether the bytes are plain TCP or TLS is the transport's business alone.
///
/// Confined to its loop's queue; `@exclusivity(unchecked)`: see `ProxyConnection`.
package final class SocketChannel {
    /// What one read brought.
    package enum ReadOutcome {
        /// New bytes in the loop's scratch memory (valid until the next read on this loop):
        /// parse them, then `keep` what was not consumed.
        case scratch(UnsafeRawBufferPointer)
        /// New bytes were appended to `input`.
        case appended
        /// Nothing now: the next readiness edge brings more.
        case wouldBlock
        /// The peer closed its sending side.
        case endOfFile
    }

    /// Replaced once at most, by `upgrade(to:)` (an upstream's TLS after its connect).
    @exclusivity(unchecked) package private(set) var transport: any ByteTransport
    let loop: EventLoop
    @exclusivity(unchecked) package var token: UInt64 = 0
    /// Bytes read but not consumed yet (nil: none, no buffer held).
    @exclusivity(unchecked) package var input: IOBuffer?
    /// Bytes queued but not written yet (nil: none, no buffer held).
    @exclusivity(unchecked) private(set) var output: IOBuffer?
    /// Edge-triggered: data may be waiting.
    @exclusivity(unchecked) package var mayRead = true
    /// EPOLLRDHUP was seen: read until EOF instead of stopping at a short read.
    @exclusivity(unchecked) private(set) var peerSentFIN = false
    /// A read returned end of file (or failed): nothing more comes from the peer.
    @exclusivity(unchecked) package var readClosed = false
    @exclusivity(unchecked) private var writeInterest = false
    /// Every byte queued for writing since the channel opened (`queue`, `noteQueued`): the access
    /// log's bytes out are the difference over one exchange.
    @exclusivity(unchecked) package private(set) var queuedBytes: UInt64 = 0
    @exclusivity(unchecked) private(set) var isClosed = false
    /// The socket when `transport` is plain TCP (`PlainTransport`), else -1: reads and writes
    /// then make `PlainTransport`'s system calls on it directly. Calling through `transport`
    /// (a `var` existential) cost a retain, a release and a witness call per read and per
    /// write: a third of a tunnel's remaining reference counting per echoed message
    /// (docs/design-notes.md, "What one echoed message costs").
    @exclusivity(unchecked) private var plainFD: Int32

    package init(transport: any ByteTransport, loop: EventLoop) {
        self.transport = transport
        self.loop = loop
        self.plainFD = Self.plainDescriptor(of: transport)
    }

    private static func plainDescriptor(of transport: any ByteTransport) -> Int32 {
        (transport as? PlainTransport)?.fd ?? -1
    }

    package var fd: Int32 { self.transport.fd }

    /// Puts `transport` (TLS over this same, now connected socket) in place of the plain one
    /// the connect ran on. The socket stays registered under the same token; nothing is
    /// buffered yet. The old transport is dropped without `close()`: the descriptor lives on.
    package func upgrade(to transport: any ByteTransport) {
        precondition(transport.fd == self.transport.fd, "a transport upgrade must keep the socket")
        precondition(self.input == nil && self.output == nil, "a transport upgrade before any byte moved")
        self.transport = transport
        self.plainFD = Self.plainDescriptor(of: transport)
    }

    /// Registers the socket with the loop for `handler` (`writable`: wait for a connect).
    package func register(handler: any EventHandler, writable: Bool = false) throws(IOError) {
        self.token = try self.loop.register(fd: self.transport.fd, handler: handler, writable: writable)
        self.writeInterest = writable
    }

    /// Records what epoll reported: data may be readable, the peer half-closed.
    @inline(__always)
    @inlinable
    package func noteEvents(_ events: UInt32) {
        if events & (EventLoop.readable | EventLoop.hangup | EventLoop.error) != 0 {
            self.mayRead = true
        } else if events & EventLoop.writable != 0 && self.transport.waitsForWritable {
            // A TLS read waited to write a handshake message: the read can go on.
            self.mayRead = true
        }
        if events & EventLoop.readHangup != 0 { self.peerSentFIN = true }
    }

    // MARK: - Through the transport

    @inline(__always)
    private func transportRead(into pointer: UnsafeMutableRawPointer, count: Int) throws(TransportError) -> IOResult {
        let fd = self.plainFD
        if fd >= 0 { return try PlainTransport.read(fd, into: pointer, count: count) }
        return try self.transport.read(into: pointer, count: count)
    }

    @inline(__always)
    private func transportWrite(_ pointer: UnsafeRawPointer, count: Int) throws(TransportError) -> IOResult {
        let fd = self.plainFD
        if fd >= 0 { return try PlainTransport.write(fd, pointer, count: count) }
        return try self.transport.write(pointer, count: count)
    }

    /// `transport.waitsForWritable` (plain TCP never waits to write for a read).
    @inline(__always)
    private var transportWaitsForWritable: Bool {
        self.plainFD >= 0 ? false : self.transport.waitsForWritable
    }

    // MARK: - Reading

    /// One read through the transport: into the loop's scratch memory when `input` holds no
    /// partial data (so an idle connection owns no buffer), else appended to `input`.
    package func readOnce() throws(TransportError) -> ReadOutcome {
        if let input = self.input, !input.isEmpty {
            input.reserveWritable(16 * 1024)
            let requested = input.writableCount
            switch try self.transportRead(into: input.writablePointer, count: requested) {
            case .processed(let n):
                input.didWrite(n)
                self.noteRead(n, requested: requested)
                return .appended
            case .wouldBlock:
                self.readBlocked()
                return .wouldBlock
            case .endOfFile:
                self.readClosed = true
                return .endOfFile
            }
        }
        let scratch = self.loop.scratch
        guard let base = scratch.baseAddress else { preconditionFailure("loop scratch buffer is empty") }
        switch try self.transportRead(into: base, count: scratch.count) {
        case .processed(let n):
            self.noteRead(n, requested: scratch.count)
            return .scratch(UnsafeRawBufferPointer(start: base, count: n))
        case .wouldBlock:
            self.readBlocked()
            return .wouldBlock
        case .endOfFile:
            self.readClosed = true
            return .endOfFile
        }
    }

    /// The read drained the socket: the next data makes a new edge (saves the EAGAIN read).
    @inline(__always)
    private func noteRead(_ count: Int, requested: Int) {
        if self.peerSentFIN { return }
        let drained =
            self.plainFD >= 0
            ? PlainTransport.drained(afterReading: count, of: requested)
            : self.transport.drained(afterReading: count, of: requested)
        if drained { self.mayRead = false }
    }

    /// What the peer had sent beyond the last request, found by `discardPending`.
    package enum PendingInput {
        /// Nothing: a close now sends a FIN, not a reset.
        case nothing
        /// Bytes were read and dropped: the peer is still sending.
        case discarded
        /// The peer closed (or the read failed): nothing more will come.
        case endOfFile
    }

    /// Reads and drops what the peer has sent. At least one read, whatever `mayRead` says:
    /// bytes may have arrived after the readiness this turn handled.
    package func discardPending() -> PendingInput {
        self.drain(readingAtLeastOnce: true)
    }

    /// Reads and drops input until the socket would block (edge-triggered: while `mayRead`,
    /// unless `readingAtLeastOnce`) or the peer is done.
    private func drain(readingAtLeastOnce: Bool) -> PendingInput {
        let scratch = self.loop.scratch
        guard let base = scratch.baseAddress else { preconditionFailure("loop scratch buffer is empty") }
        var dropped = false
        var first = readingAtLeastOnce
        while first || self.mayRead {
            first = false
            do {
                switch try self.transport.read(into: base, count: scratch.count) {
                case .processed(let count):
                    if count > 0 { dropped = true }
                case .wouldBlock:
                    self.readBlocked()
                    return dropped ? .discarded : .nothing
                case .endOfFile:
                    return .endOfFile
                }
            } catch {
                return .endOfFile
            }
        }
        return dropped ? .discarded : .nothing
    }

    private func readBlocked() {
        self.mayRead = false
        if self.transportWaitsForWritable { self.setWriteInterest(true) }
    }

    /// Keeps the unconsumed rest of a scratch read as `input`.
    package func keep(_ rest: UnsafeRawBufferPointer) {
        let input = self.input ?? self.loop.buffers.take()
        input.append(rest)
        self.input = input
    }

    /// Reads and discards until the socket would block. Returns false at end of file or on an
    /// error (lingering close: the client's late bytes must not turn our response into a reset).
    package func discardInput() -> Bool {
        self.drain(readingAtLeastOnce: false) != .endOfFile
    }

    // MARK: - Writing

    /// Bytes queued and not yet written.
    @inlinable
    package var unsentCount: Int { self.output?.readableCount ?? 0 }

    @inlinable
    package var hasUnsentOutput: Bool { !(self.output?.isEmpty ?? true) }

    package func queue(_ bytes: UnsafeRawBufferPointer) {
        let output = self.output ?? self.loop.buffers.take()
        output.append(bytes)
        self.output = output
        self.queuedBytes &+= UInt64(bytes.count)
    }

    /// Writes `bytes` at once when nothing is queued before them, and queues what the socket
    /// does not take (write interest then follows, as in `flush`). Counted in `queuedBytes` like
    /// `queue`. Returns the bytes left unsent: 0 when all went, the common case of a relay, which
    /// then takes no buffer from the pool and copies nothing (`TunnelRelay`).
    package func send(_ bytes: UnsafeRawBufferPointer) throws(TransportError) -> Int {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return self.unsentCount }
        self.queuedBytes &+= UInt64(bytes.count)
        if let output = self.output {
            output.append(bytes)
            return output.readableCount
        }
        var offset = 0
        while offset < bytes.count {
            switch try self.transportWrite(base + offset, count: bytes.count - offset) {
            case .processed(let n):
                offset += n
            case .wouldBlock, .endOfFile:
                let output = self.loop.buffers.take()
                output.append(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
                self.output = output
                self.setWriteInterest(true)
                return output.readableCount
            }
        }
        if !self.transportWaitsForWritable { self.setWriteInterest(false) }
        return 0
    }

    /// Whether an output buffer is held (queued bytes may wait): one load, no retain.
    @inlinable
    package var holdsOutput: Bool { self.output != nil }

    /// `n` bytes were written into `outputBuffer()` in place (counted in `queuedBytes`).
    package func noteQueued(_ n: Int) {
        self.queuedBytes &+= UInt64(n)
    }

    package func queue(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { self.queue($0) }
    }

    /// The output buffer, for writers that fill it in place (`ClientResponsePlan.writeHead`).
    package func outputBuffer() -> IOBuffer {
        let output = self.output ?? self.loop.buffers.take()
        self.output = output
        return output
    }

    /// Writes queued output until the socket would block; write interest follows what is left.
    /// `onProgress` runs after each partial write with the bytes still unsent.
    package func flush(onProgress: (Int) -> Void = { _ in }) throws(TransportError) {
        guard let output = self.output else { return }
        while !output.isEmpty {
            let readable = output.readableBytes
            guard let base = readable.baseAddress else { preconditionFailure("non-empty output without storage") }
            switch try self.transportWrite(base, count: readable.count) {
            case .processed(let n):
                output.consume(n)
                onProgress(output.readableCount)
            case .wouldBlock, .endOfFile:
                self.setWriteInterest(true)
                return
            }
        }
        self.output = nil
        self.loop.buffers.give(output)
        if !self.transportWaitsForWritable { self.setWriteInterest(false) }
    }

    package func setWriteInterest(_ writable: Bool) {
        guard writable != self.writeInterest, !self.isClosed else { return }
        self.writeInterest = writable
        self.loop.setWritableInterest(fd: self.transport.fd, token: self.token, writable)
    }

    // MARK: - Ending

    /// Drops unsent output and unparsed input (the connection is being reused or closed).
    package func releaseBuffers() {
        if let input = self.input { self.loop.buffers.give(input) }
        if let output = self.output { self.loop.buffers.give(output) }
        self.input = nil
        self.output = nil
    }

    /// Ends our sending side after what was written (the read side stays open).
    package func shutdownOutput() {
        self.transport.shutdownOutput()
    }

    /// Deregisters, closes the transport and gives the buffers back. Idempotent.
    package func close() {
        guard !self.isClosed else { return }
        self.isClosed = true
        self.plainFD = -1
        self.loop.deregister(fd: self.transport.fd, token: self.token)
        self.transport.close()
        self.releaseBuffers()
    }
}

@available(*, unavailable)
extension SocketChannel: Sendable {}
