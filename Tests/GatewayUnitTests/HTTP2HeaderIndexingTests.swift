import Testing

@testable import HTTPProxy

/// Fields whose value is new in every message (`x-request-id`, `traceparent`) go out "never
/// indexed" (RFC 7541 §6.2.3), not into the HPACK dynamic table, where they would evict the
/// fields that repeat and make libnghttp2's encoder walk a chain of stale request IDs per
/// response. No sockets: a server session's header blocks, byte for byte.
@Suite struct HTTP2HeaderIndexingTests {
    typealias Frames = HTTP2SharedFrameBufferTests

    /// The header block of each HEADERS frame in `bytes`, in order.
    static func headerBlocks(_ bytes: [UInt8]) -> [[UInt8]] {
        var blocks: [[UInt8]] = []
        var offset = 0
        while bytes.count - offset >= 9 {
            let length = Int(bytes[offset]) << 16 | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2])
            if bytes[offset + 3] == 1 { blocks.append(Array(bytes[offset + 9..<offset + 9 + length])) }
            offset += 9 + length
        }
        return blocks
    }

    /// Two responses on one connection, each with `field`: their header blocks.
    static func twoResponses(with field: (String, String)) throws -> [[UInt8]] {
        let peer = Frames.Peer(shared: false)
        let input = Frames.preface + Frames.settings([]) + Frames.request(1, path: "/a") + Frames.request(3, path: "/b")
        try input.withUnsafeBytes { try peer.session.receive($0) }
        try Frames.drainInTurn([peer])
        peer.session.respond(1, status: 200, headers: [field], hasBody: false)
        try Frames.drainInTurn([peer])
        peer.session.respond(3, status: 200, headers: [field], hasBody: false)
        try Frames.drainInTurn([peer])
        return Self.headerBlocks(peer.output)
    }

    @Test(arguments: ["x-request-id", "traceparent"])
    func aPerMessageFieldIsNeverIndexed(name: String) throws {
        let blocks = try Self.twoResponses(with: (name, "0af7651916cd43dd8448eb211c80319c"))
        try #require(blocks.count == 2)
        // `:status: 200` (static index 8), then a literal "never indexed" with a new name (0x10).
        #expect(blocks[0].first == 0x88)
        #expect(blocks[0].dropFirst().first == 0x10)
        // Not in the table: the second response spells it out again.
        #expect(blocks[1] == blocks[0])
    }

    @Test func aRepeatingFieldIsStillIndexed() throws {
        // The control: an ordinary field enters the table, and the second response refers to it
        // by index (one byte), so the test above can tell the two encodings apart.
        let blocks = try Self.twoResponses(with: ("x-upstream-zone", "0af7651916cd43dd8448eb211c80319c"))
        try #require(blocks.count == 2)
        #expect(blocks[0].dropFirst().first == 0x40)
        #expect(blocks[1] == [0x88, 0xBE])
    }

    @Test func onlyThoseNamesAreUniquePerMessage() {
        for (name, unique) in [
            ("x-request-id", true), ("traceparent", true), ("x-request-ie", false), ("content-type", false),
            ("tracestate", false), ("", false),
        ] {
            let bytes = Array(name.utf8)
            #expect(bytes.withUnsafeBytes { NameValueBuilder.isUniquePerMessage($0) } == unique, "\(name)")
        }
    }
}
