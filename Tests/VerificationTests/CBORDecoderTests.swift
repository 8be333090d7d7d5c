import Testing
import Verification

@Suite struct CBORDecoderTests {
    let decoder = CBORDecoder()

    func decode(_ bytes: [UInt8]) throws(VerificationError) -> CBORValue {
        try self.decoder.decode(bytes)
    }

    func expectMalformed(_ bytes: [UInt8], _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation)
    {
        #expect(throws: VerificationError(.malformedCBOR, ""), comment, sourceLocation: sourceLocation) {
            try self.decoder.decode(bytes)
        }
    }

    @Test func decodesIntegersOfEveryWidth() throws {
        #expect(try decode([0x00]) == .unsignedInteger(0))
        #expect(try decode([0x17]) == .unsignedInteger(23))
        #expect(try decode([0x18, 0x18]) == .unsignedInteger(24))
        #expect(try decode([0x19, 0x01, 0x00]) == .unsignedInteger(256))
        #expect(try decode([0x1a, 0x00, 0x01, 0x00, 0x00]) == .unsignedInteger(65536))
        #expect(try decode([0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]) == .unsignedInteger(.max))
        #expect(try decode([0x20]) == .negativeInteger(0))
        #expect(try decode([0x20]).integerValue == -1)
        #expect(try decode([0x38, 0x63]).integerValue == -100)
        #expect(try decode([0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).integerValue == nil)
    }

    @Test func decodesStringsArraysMapsAndSimpleValues() throws {
        #expect(try decode([0x43, 1, 2, 3]) == .byteString([1, 2, 3]))
        #expect(try decode([0x40]) == .byteString([]))
        #expect(try decode([0x63, 0x66, 0x6d, 0x74]) == .textString("fmt"))
        #expect(try decode([0x82, 0x01, 0x20]) == .array([.unsignedInteger(1), .negativeInteger(0)]))
        let map = try decode([0xa2, 0x01, 0x02, 0x61, 0x61, 0xf5])
        #expect(map[integerKey: 1] == .unsignedInteger(2))
        #expect(map[textKey: "a"] == .boolean(true))
        #expect(map[textKey: "b"] == nil)
        #expect(try decode([0xf4]) == .boolean(false))
        #expect(try decode([0xf6]) == .null)
        #expect(try decode([0xf7]) == .undefined)
        #expect(try decode([0xf8, 0x20]) == .simple(32))
        #expect(try decode([0xc1, 0x1a, 0x51, 0x4b, 0x67, 0xb0]) == .tagged(1, .unsignedInteger(1_363_896_240)))
        #expect(try decode([0xf9, 0x3c, 0x00]) == .float(1.0))
        #expect(try decode([0xf9, 0xc4, 0x00]) == .float(-4.0))
        #expect(try decode([0xfa, 0x47, 0xc3, 0x50, 0x00]) == .float(100000.0))
        #expect(try decode([0xfb, 0x3f, 0xf1, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a]) == .float(1.1))
    }

    @Test func decodesTheCOSEKeyShape() throws {
        // {1: 2, 3: -7, -1: 1, -2: h'..32', -3: h'..32'}
        var bytes: [UInt8] = [0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21, 0x58, 0x20]
        bytes += [UInt8](repeating: 0xaa, count: 32)
        bytes += [0x22, 0x58, 0x20] + [UInt8](repeating: 0xbb, count: 32)
        let key = try decode(bytes)
        #expect(key[integerKey: 1] == .unsignedInteger(2))
        #expect(key[integerKey: 3]?.integerValue == -7)
        #expect(key[integerKey: -2]?.byteStringValue == [UInt8](repeating: 0xaa, count: 32))
        #expect(key[integerKey: -3]?.byteStringValue == [UInt8](repeating: 0xbb, count: 32))
    }

    @Test func rejectsIndefiniteLengthItemsAndStrayBreak() {
        expectMalformed([0x5f, 0x41, 0x00, 0xff], "indefinite byte string")
        expectMalformed([0x7f, 0x61, 0x61, 0xff], "indefinite text string")
        expectMalformed([0x9f, 0x01, 0xff], "indefinite array")
        expectMalformed([0xbf, 0x01, 0x02, 0xff], "indefinite map")
        expectMalformed([0xff], "break")
    }

    @Test func rejectsReservedAdditionalInformation() {
        for major: UInt8 in 0...7 {
            for info: UInt8 in 28...30 {
                expectMalformed([major << 5 | info], "major \(major) info \(info)")
            }
        }
        expectMalformed([0xf8, 0x10], "two-byte simple value below 32")
    }

    @Test func rejectsTruncationAtEveryLength() throws {
        let valid: [UInt8] = [0xa2, 0x63, 0x66, 0x6d, 0x74, 0x42, 0x01, 0x02, 0x01, 0x82, 0x19, 0x01, 0x00, 0x20]
        _ = try decode(valid)
        for length in 0..<valid.count {
            expectMalformed(Array(valid.prefix(length)), "prefix of \(length) bytes")
        }
        for width: UInt8 in 24...27 {
            expectMalformed([width], "argument bytes missing")
        }
    }

    @Test func rejectsLengthsLargerThanTheInput() {
        expectMalformed([0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00], "byte string 2^64-1")
        expectMalformed([0x7a, 0x7f, 0xff, 0xff, 0xff, 0x61], "text string 2^31-1")
        expectMalformed([0x59, 0x00, 0x05, 1, 2, 3, 4], "byte string one short")
        expectMalformed([0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00], "array 2^64-1")
        expectMalformed([0xba, 0x00, 0x00, 0x01, 0x00, 0x00], "map of 256 pairs with no bytes")
        expectMalformed([0x83, 0x01, 0x02], "array missing an element")
    }

    @Test func rejectsContainersOverTheCountLimit() throws {
        let small = CBORDecoder(limits: .init(maxContainerCount: 3))
        _ = try small.decode([0x83, 1, 2, 3])
        #expect(throws: VerificationError(.malformedCBOR, "")) { try small.decode([0x84, 1, 2, 3, 4]) }
    }

    @Test func rejectsInputOverTheSizeLimit() throws {
        let small = CBORDecoder(limits: .init(maxInputBytes: 8))
        _ = try small.decode([0x47, 1, 2, 3, 4, 5, 6, 7])
        #expect(throws: VerificationError(.malformedCBOR, "")) { try small.decode([0x48, 1, 2, 3, 4, 5, 6, 7, 8]) }
    }

    @Test func rejectsDeepNesting() throws {
        let limit = CBORDecoder.Limits().maxDepth
        let atLimit = [UInt8](repeating: 0x81, count: limit) + [0x00]
        _ = try decode(atLimit)
        expectMalformed([UInt8](repeating: 0x81, count: limit + 1) + [0x00], "arrays")
        expectMalformed(Self.nestedMaps(limit + 1), "maps")
        expectMalformed([UInt8](repeating: 0xc1, count: limit + 1) + [0x00], "tags")
        // Far beyond: must not exhaust the stack.
        expectMalformed([UInt8](repeating: 0x81, count: 100_000) + [0x00], "100k arrays")
    }

    static func nestedMaps(_ depth: Int) -> [UInt8] {
        // {0: {0: ... 0}}
        var bytes: [UInt8] = []
        for _ in 0..<depth { bytes += [0xa1, 0x00] }
        return bytes + [0x00]
    }

    @Test func rejectsTrailingBytes() throws {
        _ = try decode([0x01])
        expectMalformed([0x01, 0x00])
        expectMalformed([0xa0, 0xa0])
        let (value, end) = try decoder.decodePrefix([0x01, 0x02], from: 0)
        #expect(value == .unsignedInteger(1) && end == 1)
    }

    @Test func rejectsDuplicateMapKeys() {
        expectMalformed([0xa2, 0x01, 0x00, 0x01, 0x00])
        expectMalformed([0xa2, 0x61, 0x61, 0x00, 0x61, 0x61, 0x01])
    }

    @Test func rejectsInvalidUTF8() {
        expectMalformed([0x62, 0xc3, 0x28])
        expectMalformed([0x61, 0xff])
    }

    @Test func randomBytesNeverCrash() {
        var generator = SplitMix64(seed: 0x5eed)
        var decoded = 0
        for _ in 0..<20_000 {
            let length = Int(generator.next() % 64)
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            do {
                _ = try decoder.decode(bytes)
                decoded += 1
            } catch {
                #expect(error.code == .malformedCBOR)
            }
        }
        #expect(decoded > 0)  // some random inputs are valid CBOR (e.g. single small integers)
    }
}
