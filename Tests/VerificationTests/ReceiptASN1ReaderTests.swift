import Testing
import Verification

/// The bounded DER/BER reader under the receipt verifier.
@Suite struct ReceiptASN1ReaderTests {
    let der = ASN1Limits.der(errorCode: .malformedReceipt)
    let ber = ASN1Limits.ber(errorCode: .malformedReceipt)

    func code(_ bytes: [UInt8], _ limits: ASN1Limits) -> VerificationError.Code? {
        do {
            _ = try ASN1Reader.parseSingle(bytes, limits: limits)
            return nil
        } catch {
            return error.code
        }
    }

    @Test func readsNestedDER() throws {
        // SEQUENCE { INTEGER 5, OCTET STRING "ab", OID 1.2.840.113549.1.7.2 }
        let bytes: [UInt8] = [
            0x30, 0x12, 0x02, 0x01, 0x05, 0x04, 0x02, 0x61, 0x62,
            0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x02,
        ]
        let element = try ASN1Reader.parseSingle(bytes, limits: self.der)
        #expect(element.identifier == .sequence)
        var reader = try element.childReader(limits: self.der)
        #expect(try reader.read(.integer, "int").integerValue(limits: self.der) == 5)
        #expect(try reader.read(.octetString, "octets").octetStringBytes(limits: self.der) == [0x61, 0x62])
        #expect(try reader.read(.objectIdentifier, "oid").objectIdentifier(limits: self.der) == "1.2.840.113549.1.7.2")
        try reader.expectEnd("sequence")
    }

    @Test func integers() throws {
        func value(_ content: [UInt8]) throws -> Int {
            try ASN1Reader.parseSingle([0x02, UInt8(content.count)] + content, limits: self.der).integerValue(
                limits: self.der)
        }
        #expect(try value([0x00]) == 0)
        #expect(try value([0x7f]) == 127)
        #expect(try value([0x00, 0x80]) == 128)
        #expect(try value([0xff]) == -1)
        #expect(try value([0x01, 0x00]) == 256)
        #expect(throws: VerificationError.self) { try value([]) }
        #expect(throws: VerificationError.self) { try value([0x00, 0x01]) }  // non-minimal
        #expect(throws: VerificationError.self) { try value([0xff, 0x80]) }  // non-minimal
        #expect(throws: VerificationError.self) { try value([UInt8](repeating: 0x11, count: 9)) }  // too large
    }

    @Test func rejectsTruncationAndOversizedLengths() {
        #expect(self.code([], self.der) == .malformedReceipt)
        #expect(self.code([0x30], self.der) == .malformedReceipt)
        #expect(self.code([0x04, 0x05, 0x01], self.der) == .malformedReceipt)  // 5 announced, 1 present
        #expect(self.code([0x04, 0x84, 0xff, 0xff, 0xff, 0xff], self.der) == .malformedReceipt)
        #expect(self.code([0x04, 0x85, 0, 0, 0, 0, 1, 0], self.der) == .malformedReceipt)  // 5 length octets
        #expect(self.code([0x04, 0x82, 0x01], self.der) == .malformedReceipt)  // truncated length
        #expect(self.code([0x1f], self.der) == .malformedReceipt)  // truncated high tag
        #expect(self.code([0x1f, 0x80, 0x01, 0x00], self.der) == .malformedReceipt)  // non-minimal tag
        #expect(self.code([0x1f, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00], self.der) == .malformedReceipt)
    }

    @Test func rejectsTrailingBytes() {
        #expect(self.code([0x05, 0x00, 0x00], self.der) == .malformedReceipt)
        #expect(self.code([0x05, 0x00], self.der) == nil)
    }

    @Test func derRequiresMinimalLengths() {
        let nonMinimal: [UInt8] = [0x04, 0x81, 0x02, 0x61, 0x62]
        #expect(self.code(nonMinimal, self.der) == .malformedReceipt)
        #expect(self.code(nonMinimal, self.ber) == nil)
        #expect(self.code([0x04, 0x82, 0x00, 0x02, 0x61, 0x62], self.der) == .malformedReceipt)
    }

    @Test func indefiniteLengthOnlyWhenAsked() throws {
        // SEQUENCE (indefinite) { OCTET STRING (constructed, indefinite) { "ab", "c" } }
        let bytes: [UInt8] = [
            0x30, 0x80,
            0x24, 0x80, 0x04, 0x02, 0x61, 0x62, 0x04, 0x01, 0x63, 0x00, 0x00,
            0x00, 0x00,
        ]
        #expect(self.code(bytes, self.der) == .malformedReceipt)
        let element = try ASN1Reader.parseSingle(bytes, limits: self.ber)
        #expect(element.isIndefiniteLength)
        #expect(element.encoded.count == bytes.count)
        let children = try element.children(limits: self.ber)
        #expect(children.count == 1)
        #expect(try children[0].octetStringBytes(limits: self.ber) == Array("abc".utf8))
        // Constructed OCTET STRING is BER only.
        #expect(throws: VerificationError.self) { try children[0].octetStringBytes(limits: self.der) }
    }

    @Test func indefiniteLengthErrors() {
        #expect(self.code([0x30, 0x80, 0x05, 0x00], self.ber) == .malformedReceipt)  // no end-of-contents
        #expect(self.code([0x04, 0x80, 0x00, 0x00], self.ber) == .malformedReceipt)  // primitive
        #expect(self.code([0x00, 0x00], self.ber) == .malformedReceipt)  // bare end-of-contents
        #expect(self.code([0x30, 0x80, 0x00, 0x01, 0x00], self.ber) == .malformedReceipt)  // EOC with a length
        #expect(self.code([0x30, 0x02, 0x00, 0x00], self.ber) == nil)  // EOC is only looked at when read
    }

    @Test func nestingIsCapped() {
        var limits = self.ber
        limits.maximumDepth = 8
        // 8 nested indefinite SEQUENCEs are fine (depth 0...7), 9 are not.
        func nested(_ depth: Int) -> [UInt8] {
            Array(repeating: [0x30, 0x80], count: depth).flatMap { $0 } + Array(repeating: 0x00, count: 2 * depth)
        }
        #expect(self.code(nested(8), limits) == nil)
        #expect(self.code(nested(9), limits) == .malformedReceipt)
        // 100 000 levels: a typed error, not a stack overflow.
        #expect(self.code(nested(100_000), self.ber) == .malformedReceipt)
    }

    @Test func definiteChildrenAreCheckedWhenRead() throws {
        // The outer length fits, the inner one lies.
        let bytes: [UInt8] = [0x30, 0x03, 0x04, 0x05, 0x61]
        let element = try ASN1Reader.parseSingle(bytes, limits: self.der)
        #expect(throws: VerificationError.self) { try element.children(limits: self.der) }
    }

    @Test func inputSizeIsCapped() {
        var limits = self.der
        limits.maximumInputSize = 16
        #expect(self.code([0x04, 0x0f] + [UInt8](repeating: 0, count: 15), limits) == .malformedReceipt)
        #expect(self.code([0x04, 0x0e] + [UInt8](repeating: 0, count: 14), limits) == nil)
    }

    @Test func objectIdentifiers() throws {
        func oid(_ content: [UInt8]) throws -> String {
            try ASN1Reader.parseSingle([0x06, UInt8(content.count)] + content, limits: self.der)
                .objectIdentifier(limits: self.der)
        }
        #expect(try oid([0x2a, 0x86, 0x48, 0x86, 0xf7, 0x63, 0x64, 0x08, 0x02]) == "1.2.840.113635.100.8.2")
        #expect(try oid([0x55, 0x1d, 0x13]) == "2.5.29.19")
        #expect(throws: VerificationError.self) { try oid([]) }
        #expect(throws: VerificationError.self) { try oid([0x2a, 0x86]) }  // unterminated arc
        #expect(throws: VerificationError.self) { try oid([0x2a, 0x80, 0x01]) }  // non-minimal arc
        #expect(throws: VerificationError.self) { try oid([0x2a] + [UInt8](repeating: 0xff, count: 10) + [0x01]) }
    }

    @Test func errorsCarryTheChosenCode() {
        let limits = ASN1Limits.der(errorCode: .malformedCertificate)
        #expect(self.code([0x30], limits) == .malformedCertificate)
    }

    /// Random bytes either throw the chosen code, or parse to one element covering the whole
    /// input whose descendants each lie inside their parent's content, one level deeper, and
    /// tile it without gaps or overlap.
    @Test func randomInputThrowsOrParsesWithinBounds() {
        var generator = SplitMix64(seed: 0x5eed)
        var parsed = 0
        var thrown = 0
        for _ in 0..<3000 {
            let count = Int(generator.next() % 64)
            var bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            // Bias towards structure: start with a constructed tag most of the time.
            if !bytes.isEmpty && generator.next() % 2 == 0 { bytes[0] = 0x30 }
            // And towards a length that spans the rest, so that the children get read.
            if count >= 2 && generator.next() % 2 == 0 { bytes[1] = UInt8(count - 2) }
            for limits in [self.der, self.ber] {
                do {
                    let element = try ASN1Reader.parseSingle(bytes, limits: limits)
                    parsed += 1
                    #expect(element.encoded.startIndex == 0 && element.encoded.endIndex == bytes.count)
                    #expect(element.depth == 0)
                    self.expectWithinBounds(element, limits: limits)
                } catch {
                    thrown += 1
                    #expect(error.code == .malformedReceipt)
                }
            }
        }
        // Both outcomes happen, so neither half of the property holds vacuously.
        #expect(parsed > 100)
        #expect(thrown > 100)
    }

    /// `element`'s content lies inside its encoding, ending where it ends (or 2 bytes before,
    /// at the end-of-contents marker); children, when they parse, tile the content.
    private func expectWithinBounds(_ element: ASN1Element, limits: ASN1Limits) {
        let encoded = element.encoded.indices
        let content = element.content.indices
        #expect(content.lowerBound >= encoded.lowerBound)
        #expect(content.upperBound == encoded.upperBound - (element.isIndefiniteLength ? 2 : 0))
        guard element.identifier.isConstructed, let children = try? element.children(limits: limits) else { return }
        var position = content.lowerBound
        for child in children {
            #expect(child.depth == element.depth + 1)
            #expect(child.encoded.startIndex == position)
            position = child.encoded.endIndex
            self.expectWithinBounds(child, limits: limits)
        }
        #expect(position == content.upperBound)
    }
}
