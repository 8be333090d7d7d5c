import Foundation
import Testing

@testable import HTTPProxy

/// The server sessions' allocator (`HTTP2Library.newServerSession`, CGatewayShims'
/// h2_session_memory.c): the sessions one thread creates share one outbound frame buffer. A
/// differential test: two sessions on the shared buffer, driven with the same input as two
/// sessions on libnghttp2's default allocator and their frames drained one chunk at a time in
/// turn, must write exactly the same bytes: big header blocks (HEADERS + CONTINUATION, whose
/// extra chunks must stay private), response bodies larger than the buffer, stream and
/// connection windows that stall the bodies until WINDOW_UPDATE, and GOAWAY. No sockets: the
/// test feeds frames and collects what the sessions give.
@Suite struct HTTP2SharedFrameBufferTests {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32, _ payload: [UInt8] = []) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags]
            + [UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)]
            + payload
    }

    static func word(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    /// SETTINGS (RFC 9113 §6.5): identifier, value.
    static func settings(_ entries: [(UInt16, UInt32)]) -> [UInt8] {
        Self.frame(4, stream: 0, entries.flatMap { [UInt8($0.0 >> 8), UInt8($0.0 & 0xFF)] + Self.word($0.1) })
    }

    static func windowUpdate(_ stream: UInt32, _ increment: UInt32) -> [UInt8] {
        Self.frame(8, stream: stream, Self.word(increment))
    }

    /// A request: HPACK literals without indexing, new names, no Huffman, END_STREAM | END_HEADERS.
    static func request(_ stream: UInt32, path: String) -> [UInt8] {
        var block: [UInt8] = []
        for (name, value) in [(":method", "GET"), (":scheme", "https"), (":authority", "h2.test"), (":path", path)] {
            block += [0x00, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
        }
        return Self.frame(1, flags: 0x5, stream: stream, block)
    }

    /// Serves the bodies the test sets; a stream with no body set yet is deferred.
    final class Responder: HTTP2SessionDelegate {
        var bodies: [Int32: [UInt8]] = [:]
        var offsets: [Int32: Int] = [:]
        var closed: [Int32] = []

        func http2StreamOpened(_ streamID: Int32) {}
        func http2Field(_ streamID: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool {
            true
        }
        func http2HeadersEnded(_ streamID: Int32, endStream: Bool) {}
        func http2TrailersEnded(_ streamID: Int32) {}
        func http2Data(_ streamID: Int32, _ bytes: UnsafeRawBufferPointer) {}
        func http2DataEnded(_ streamID: Int32) {}
        func http2StreamClosed(_ streamID: Int32, errorCode: UInt32) { self.closed.append(streamID) }
        func http2FrameReceived(_ kind: HTTP2FrameKind, streamID: Int32, flags: UInt8, length: Int) -> Bool { true }
        /// Run (once) from the next frame-sent callback.
        var whenFrameSent: (() -> Void)?

        func http2FrameSent(_ kind: HTTP2FrameKind, streamID: Int32, flags: UInt8, errorCode: UInt32) {
            let action = self.whenFrameSent
            self.whenFrameSent = nil
            action?()
        }
        func http2ResponseBody(
            _ streamID: Int32, into buffer: UnsafeMutableRawBufferPointer
        ) -> (count: Int, last: Bool, trailers: [(String, String)])? {
            guard let body = self.bodies[streamID] else { return nil }
            let offset = self.offsets[streamID, default: 0]
            let count = min(buffer.count, body.count - offset)
            body.withUnsafeBytes { source in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<offset + count]))
            }
            self.offsets[streamID] = offset + count
            let last = offset + count == body.count
            return (count, last, last ? [("x-checksum", "\(body.count)")] : [])
        }
    }

    /// One session and what it wrote, chunk by chunk.
    final class Peer {
        let responder = Responder()
        let session: HTTP2Session
        var output: [UInt8] = []
        /// Chunks that came out of this thread's shared frame buffer.
        var sharedChunks = 0

        init(shared: Bool) {
            self.session = HTTP2Session(
                delegate: self.responder, settings: HTTP2Session.Settings(), sharedFrameBuffer: shared)
        }

        /// One nghttp2_session_mem_send at most (limit 1: the first chunk crosses it).
        func sendOneChunk() throws -> Bool {
            let buffer = HTTP2Library.threadFrameBuffer
            let sent = try self.session.send(limit: 1) { chunk in
                if let buffer, let base = chunk.baseAddress, base >= buffer, base < buffer + 16_394 {
                    self.sharedChunks += 1
                }
                self.output.append(contentsOf: chunk)
            }
            return sent > 0
        }
    }

    /// The types of the frames in `bytes`, in order.
    static func frameTypes(_ bytes: [UInt8]) -> [UInt8] {
        var types: [UInt8] = []
        var offset = 0
        while bytes.count - offset >= 9 {
            types.append(bytes[offset + 3])
            offset += 9 + (Int(bytes[offset]) << 16 | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2]))
        }
        return types
    }

    /// Sessions `index` 0 and 1 get different header values and bodies, so a chunk one wrote
    /// into the other's would show.
    static func body(_ index: Int, _ stream: Int32, count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index &* 7 &+ Int(stream)) }
    }

    static func bigHeaders(_ index: Int) -> [(String, String)] {
        // 40 KB of letters, ~25 KB after HPACK's Huffman code: HEADERS and CONTINUATION frames.
        (0..<40).map { field in
            let letters = (0..<1000).map { Character(UnicodeScalar(UInt8(97 + ($0 &+ field &+ index) % 26))) }
            return ("x-big-\(field)", String(letters))
        }
    }

    /// Drains all sessions one chunk at a time in turn until none has anything to send.
    static func drainInTurn(_ peers: [Peer]) throws {
        var active = true
        while active {
            active = false
            for peer in peers where try peer.sendOneChunk() { active = true }
        }
    }

    /// The whole exchange for two sessions: `shared` picks the allocator.
    static func run(shared: Bool) throws -> [Peer] {
        let peers = [Peer(shared: shared), Peer(shared: shared)]
        for (index, peer) in peers.enumerated() {
            // Stream windows of 20,000 bytes (the connection's stays 65,535): the bodies stall.
            let input =
                Self.preface + Self.settings([(0x4, 20_000)]) + Self.request(1, path: "/big/\(index)")
                + Self.request(3, path: "/small/\(index)")
            try input.withUnsafeBytes { try peer.session.receive($0) }
        }
        try Self.drainInTurn(peers)
        for (index, peer) in peers.enumerated() {
            peer.responder.bodies[1] = Self.body(index, 1, count: 50_000)
            peer.session.respond(1, status: 200, headers: Self.bigHeaders(index), hasBody: true)
            peer.session.respond(3, status: 200, headers: [("content-type", "text/plain")], hasBody: true)
        }
        try Self.drainInTurn(peers)
        for (index, peer) in peers.enumerated() {
            // The deferred stream gets its body; the windows open in two steps.
            peer.responder.bodies[3] = Self.body(index, 3, count: 30_000)
            peer.session.resume(3)
        }
        try Self.drainInTurn(peers)
        for step in 0..<2 {
            for peer in peers {
                let input =
                    Self.windowUpdate(0, 40_000 + UInt32(step)) + Self.windowUpdate(1, 20_000)
                    + Self.windowUpdate(3, 15_000)
                try input.withUnsafeBytes { try peer.session.receive($0) }
            }
            try Self.drainInTurn(peers)
        }
        for peer in peers {
            let input = Self.windowUpdate(0, 50_000) + Self.windowUpdate(1, 50_000) + Self.windowUpdate(3, 50_000)
            try input.withUnsafeBytes { try peer.session.receive($0) }
            peer.session.goAway(.noError)
        }
        try Self.drainInTurn(peers)
        return peers
    }

    @Test func sharedFrameBufferWritesWhatTheDefaultAllocatorWrites() throws {
        let reference = try Self.run(shared: false)
        let before = HTTP2Library.threadMemoryStats
        let shared = try Self.run(shared: true)
        // Both sessions got this thread's buffer, and the reference ones did not.
        #expect(HTTP2Library.threadMemoryStats.frameBufferHandouts == before.frameBufferHandouts + 2)
        #expect(HTTP2Library.threadFrameBuffer != nil)
        for index in 0..<2 {
            #expect(shared[index].sharedChunks > 10)
            #expect(reference[index].sharedChunks == 0)
            // The bodies went out, and the big header block needed CONTINUATION frames.
            #expect(shared[index].output.count > 80_000 + 16_384)
            #expect(Self.frameTypes(shared[index].output).filter { $0 == 9 }.count >= 1)
            #expect(shared[index].output == reference[index].output, "session \(index)")
            #expect(shared[index].responder.closed.sorted() == [1, 3])
            #expect(reference[index].responder.closed.sorted() == [1, 3])
        }
        #expect(shared[0].output != shared[1].output)
    }

    @Test func aSessionWithoutStreamsLeavesItsStreamMapPageUntouched() throws {
        let before = HTTP2Library.threadMemoryStats
        var peer: Peer? = Peer(shared: true)
        // The stream map's page and the HPACK rings' page.
        #expect(HTTP2Library.threadMemoryStats.poolPagesTaken == before.poolPagesTaken + 2)
        #expect(HTTP2Library.lastStreamMapPageResident == false)
        let input = Self.preface + Self.settings([])
        try input.withUnsafeBytes { try peer?.session.receive($0) }
        try Self.drainInTurn(peer.map { [$0] } ?? [])
        // Our SETTINGS (three entries), then the ACK of the client's: and still no stream.
        #expect(peer?.output.count == 9 + 3 * 6 + 9)
        #expect(HTTP2Library.lastStreamMapPageResident == false)
        // A stream is an entry in the map: now the page is written.
        try Self.request(1, path: "/").withUnsafeBytes { try peer?.session.receive($0) }
        #expect(HTTP2Library.lastStreamMapPageResident == true)
        peer = nil
        // The session's pages went back to the pool (and to the kernel) with it.
        #expect(HTTP2Library.threadMemoryStats.poolPagesGivenBack == before.poolPagesGivenBack + 2)
    }

    @Test func aSendNestedInAnotherSessionsCallbackFailsInsteadOfCorruptingAFrame() throws {
        let outer = Peer(shared: true)
        let inner = Peer(shared: true)
        // Both have their SETTINGS to send; the outer one's frame-sent callback makes the inner
        // one send into the buffer they share before the outer chunk was copied.
        outer.responder.whenFrameSent = { _ = try? inner.sendOneChunk() }
        #expect(throws: HTTP2Session.Failure.self) { try outer.sendOneChunk() }
        #expect(inner.output.count == 9 + 3 * 6)
        // Without the nesting, a send goes through.
        #expect(try Peer(shared: true).sendOneChunk())
    }

    /// A session driven from a thread that did not create it would pack frames into a buffer
    /// that thread's own sessions write: the send is refused and the session ends.
    @Test func aSessionSendingOffItsCreatingThreadIsRefused() throws {
        final class Box: @unchecked Sendable {
            let peer = Peer(shared: true)
            var failure: HTTP2Session.Failure?
            var sent = false
        }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            do throws(HTTP2Session.Failure) {
                box.sent = try box.peer.session.send(limit: 1) { _ in } > 0
            } catch {
                box.failure = error
            }
            done.signal()
        }
        thread.start()
        done.wait()
        #expect(!box.sent)
        guard case .sessionEnded(let reason) = box.failure else {
            Issue.record("expected the off-thread send to be refused, got \(String(describing: box.failure))")
            return
        }
        #expect(reason.contains("off its loop's thread"))
        // On its own thread the same session sends its SETTINGS.
        #expect(try box.peer.sendOneChunk())
    }
}
