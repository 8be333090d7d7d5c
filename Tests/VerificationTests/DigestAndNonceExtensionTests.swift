import Foundation
import Testing

@testable import Verification

@Suite struct DigestAndNonceExtensionTests {
    @Test func fetchedSHA256MatchesSHA256() {
        var generator = SplitMix64(seed: 99)
        for length in [0, 1, 31, 32, 33, 55, 56, 64, 65, 1000] {
            let a = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            let b = (0..<(length / 2)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            #expect(SHA256.hash(a) == SHA256.hash(a))
            #expect(SHA256.hash(a, b) == SHA256.hash(a + b))
        }
        // FIPS 180-2 "abc".
        #expect(
            SHA256.hash(Array("abc".utf8)).hexString
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func hexStringIsLowerCaseTwoDigitsPerByteForAnyCollection() {
        let bytes: [UInt8] = [0x00, 0x09, 0x0a, 0x0f, 0x10, 0x7f, 0xa5, 0xff]
        #expect(bytes.hexString == "00090a0f107fa5ff")
        #expect(bytes[2..<5].hexString == "0a0f10")
        #expect(bytes.prefix(1).hexString == "00")
        #expect(bytes.reversed().hexString == "ffa57f100f0a0900")
        #expect([UInt8]().hexString.isEmpty)
        let all = (0...255).map { UInt8($0) }.hexString
        #expect(all.utf8.count == 512)
        #expect(all == (0...255).map { String(format: "%02x", $0) }.joined())
    }

    static let nonce = [UInt8](repeating: 0xab, count: 32)

    @Test func parsesTheNonceExtension() {
        let der: [UInt8] = [0x30, 0x24, 0xa1, 0x22, 0x04, 0x20] + Self.nonce
        #expect(NonceExtension.nonce(fromExtensionValue: der) == Self.nonce)
        // Other lengths are carried as they are (the comparison with the computed nonce decides).
        #expect(NonceExtension.nonce(fromExtensionValue: [0x30, 0x05, 0xa1, 0x03, 0x04, 0x01, 0x07]) == [0x07])
    }

    @Test func rejectsAnythingElse() {
        let good: [UInt8] = [0x30, 0x24, 0xa1, 0x22, 0x04, 0x20] + Self.nonce
        let cases: [[UInt8]] = [
            [],
            Array(good.dropLast()),  // truncated
            good + [0x00],  // trailing
            [0x31] + good.dropFirst(),  // SET, not SEQUENCE
            [0x30, 0x24, 0xa0, 0x22, 0x04, 0x20] + Self.nonce,  // [0], not [1]
            [0x30, 0x24, 0xa1, 0x22, 0x03, 0x20] + Self.nonce,  // BIT STRING
            [0x30, 0x26, 0xa1, 0x22, 0x04, 0x20] + Self.nonce + [0x05, 0x00],  // extra element in the SEQUENCE
            [0x30, 0x80, 0xa1, 0x22, 0x04, 0x20] + Self.nonce + [0x00, 0x00],  // BER indefinite length
            [0x30, 0x81, 0x24, 0xa1, 0x22, 0x04, 0x20] + Self.nonce,  // non-minimal length
            [0x30, 0x84, 0xff, 0xff, 0xff, 0xff],  // huge length
            [0x30, 0x24, 0xa1, 0x7f, 0x04, 0x20] + Self.nonce,  // inner length past the end
        ]
        for der in cases {
            #expect(NonceExtension.nonce(fromExtensionValue: der) == nil, "\(der.prefix(8).hexString)")
        }
    }
}
