import Testing

@testable import Verification

@Suite struct ByteArrayWritingTests {
    /// Sizes on the stack, at the 1 KiB edge and on the heap all give exactly what was written.
    @Test(arguments: [0, 1, 32, 1023, 1024, 1025, 70_000])
    func theArrayHoldsExactlyTheWrittenBytes(count: Int) {
        let bytes = [UInt8](count: count) { buffer in
            #expect(buffer.count == count)
            for index in buffer.indices { buffer[index] = UInt8(truncatingIfNeeded: index &* 31 &+ 7) }
        }
        #expect(bytes.count == count)
        #expect(bytes == (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
    }

    @Test func bytesTheWriterLeavesAreZero() {
        let bytes = [UInt8](count: 2000) { buffer in buffer[7] = 1 }
        #expect(bytes.count == 2000)
        #expect(bytes[7] == 1)
        #expect(bytes.enumerated().allSatisfy { $0.offset == 7 || $0.element == 0 })
    }

    @Test func anErrorFromTheWriterPropagates() {
        struct Refused: Error {}
        #expect(throws: Refused.self) {
            _ = try [UInt8](count: 8) { _ in throw Refused() }
        }
    }
}
