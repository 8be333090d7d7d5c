import Foundation
import GatewayTesting
import Testing

@testable import Enforcement
@testable import GatewayIO

@Suite struct Base64TextTests {
    private func decode(_ text: String) -> Base64Text.Decoded {
        var copy = text
        return copy.withUTF8 { Base64Text.decode($0) }
    }

    @Test func roundTripsEveryLengthLikeFoundation() {
        var generator = SystemRandomNumberGenerator()
        for length in 0...130 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let encoded = Base64Text.encode(bytes)
            #expect(encoded == Data(bytes).base64EncodedString(), "length \(length)")
            if length > 0 {
                #expect(self.decode(encoded) == .bytes(bytes), "length \(length)")
                #expect(EndpointRequests.decodeBase64(encoded) == bytes)
            }
        }
    }

    @Test func allByteValuesRoundTrip() {
        let bytes = (0...255).map { UInt8($0) }
        #expect(self.decode(Base64Text.encode(bytes)) == .bytes(bytes))
    }

    @Test func refusesWhatIsNotPaddedStandardBase64() {
        for text in [
            "", "   ", "QQ", "QQ=", "Q===", "====", "QQ==QQ==", "QQ=Q", "QUJ D", "-__-", "QUJD!", "QUJ\u{0B}",
            "QUJDRA", "QUJDRA=", "=QUJ", "QU=D",
        ] {
            #expect(self.decode(text) == .invalid, "\(text.debugDescription)")
            #expect(EndpointRequests.decodeBase64(text) == nil, "\(text.debugDescription)")
        }
    }

    @Test func decodesPaddedForms() {
        #expect(self.decode("QQ==") == .bytes([0x41]))
        #expect(self.decode("QUI=") == .bytes([0x41, 0x42]))
        #expect(self.decode("QUJD") == .bytes([0x41, 0x42, 0x43]))
        #expect(self.decode("+/8=") == .bytes([0xfb, 0xff]))
        // Unused low bits of the last group are ignored, as by Foundation's decoder.
        #expect(self.decode("QR==") == .bytes([0x41]))
        #expect(Data(base64Encoded: "QR==").map { [UInt8]($0) } == [0x41])
    }

    @Test func trimsBlanksAndLeavesUnicodeToFoundation() {
        #expect(self.decode(" \tAQ==\t ") == .bytes([0x01]))
        #expect(self.decode("\u{00A0}AQ==") == .needsUnicodeTrim)
        #expect(self.decode("AQ==\u{2003}") == .needsUnicodeTrim)
        // The public entry point trims Unicode blanks (Foundation's .whitespaces) like before.
        #expect(EndpointRequests.decodeBase64("\u{00A0}AQ==\u{2003}") == [0x01])
        #expect(EndpointRequests.decodeBase64("é") == nil)
        #expect(EndpointRequests.decodeBase64("AQ\u{00E9}=") == nil)
        // Newlines are not blanks here (Foundation's .whitespaces does not trim them either).
        #expect(EndpointRequests.decodeBase64("AQ==\n") == nil)
        // Substrings take the same path.
        let line = "key AQ== end"
        let middle = line.split(separator: " ")[1]
        #expect(EndpointRequests.decodeBase64(middle) == [0x01])
    }
}
