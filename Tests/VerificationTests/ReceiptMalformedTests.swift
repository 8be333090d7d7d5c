import Foundation
import Simulator
import Testing
import Verification

/// Malformed, truncated, tampered and random receipts give typed errors, never a crash or a pass.
@Suite struct ReceiptMalformedTests {
    static func realReceipt(_ id: String = "rcpt-01") throws -> [UInt8] {
        try #require(try ReceiptVector.loadAll().first { $0.id == id }).receipt
    }

    func code(_ bytes: [UInt8], verifier: ReceiptVerifier) -> VerificationError.Code? {
        do {
            _ = try verifier.verify(receipt: bytes, appID: nil, publicKey: nil, at: nil)
            return nil
        } catch {
            return error.code
        }
    }

    @Test(arguments: ["rcpt-01", "rcpt-02"])
    func everyTruncationIsMalformed(id: String) throws {
        // rcpt-01 is BER (indefinite lengths, chunked), rcpt-02 definite-length DER.
        let receipt = try Self.realReceipt(id)
        let verifier = try ReceiptVerifier()
        for length in 0..<receipt.count {
            let code = self.code(Array(receipt.prefix(length)), verifier: verifier)
            #expect(code == .malformedReceipt, "\(id) truncated to \(length) bytes: \(String(describing: code))")
        }
    }

    @Test func trailingBytesAreMalformed() throws {
        let verifier = try ReceiptVerifier()
        #expect(self.code(try Self.realReceipt() + [0x00], verifier: verifier) == .malformedReceipt)
        #expect(self.code(try Self.realReceipt("rcpt-02") + [0x05, 0x00], verifier: verifier) == .malformedReceipt)
    }

    @Test func oversizedInputIsRejectedBeforeParsing() throws {
        let verifier = try ReceiptVerifier()
        let huge = [0x30, 0x84, 0x00, 0x01, 0x00, 0x00] + [UInt8](repeating: 0, count: 65_536)
        #expect(self.code(huge, verifier: verifier) == .malformedReceipt)
    }

    @Test func lyingLengthsAreMalformed() throws {
        let verifier = try ReceiptVerifier()
        var receipt = try Self.realReceipt("rcpt-02")  // 30 82 0e b4 ...
        receipt[2] = 0xff  // outer length larger than the input
        #expect(self.code(receipt, verifier: verifier) == .malformedReceipt)
        var shorter = try Self.realReceipt("rcpt-02")
        shorter[3] &-= 1  // outer length one short: one trailing byte
        #expect(self.code(shorter, verifier: verifier) == .malformedReceipt)
        var chunk = try Self.realReceipt()  // first 1000-byte chunk header `04 82 03 e8` at offset 54
        #expect(Array(chunk[54..<58]) == [0x04, 0x82, 0x03, 0xe8])
        chunk[56] = 0x7f  // chunk claims 32 KiB
        #expect(self.code(chunk, verifier: verifier) == .malformedReceipt)
    }

    @Test func randomBytesAreMalformed() throws {
        let verifier = try ReceiptVerifier()
        var generator = SplitMix64(seed: 42)
        for round in 0..<500 {
            let count = Int(generator.next() % 512)
            var bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            if round % 2 == 0, !bytes.isEmpty { bytes[0] = 0x30 }
            let code = self.code(bytes, verifier: verifier)
            #expect(code == .malformedReceipt, "round \(round): \(String(describing: code))")
        }
    }

    @Test func bitFlipsInTheSignedContentNeverVerify() throws {
        // Every bit of the first 64 payload bytes of the BER receipt (offset 58: after the chunk header).
        let receipt = try Self.realReceipt()
        let verifier = try ReceiptVerifier()
        for offset in 58..<122 {
            for bit in 0..<8 {
                var tampered = receipt
                tampered[offset] ^= UInt8(1 << bit)
                let code = self.code(tampered, verifier: verifier)
                #expect(code == .receiptSignatureInvalid, "flip at \(offset).\(bit): \(String(describing: code))")
            }
        }
    }

    @Test func mutationsAnywhereGiveTypedErrorsOrTheSameReceipt() throws {
        // Flipping bits outside the signed content may land in data nobody checks (the copy of
        // the root certificate, say); then the result must be the original receipt.
        let receipt = try Self.realReceipt()
        let verifier = try ReceiptVerifier()
        let original = try verifier.verify(receipt: receipt, appID: nil, publicKey: nil, at: nil)
        var generator = SplitMix64(seed: 7)
        for _ in 0..<400 {
            var tampered = receipt
            let offset = Int(generator.next() % UInt64(receipt.count))
            tampered[offset] ^= UInt8(1 << (generator.next() % 8))
            if let parsed = try? verifier.verify(receipt: tampered, appID: nil, publicKey: nil, at: nil) {
                #expect(parsed == original, "mutation at \(offset) changed a verified receipt")
            }
        }
    }

    @Test func notSignedDataIsMalformed() throws {
        let verifier = try ReceiptVerifier()
        // ContentInfo of type `data` (1.2.840.113549.1.7.1).
        let data: [UInt8] = [
            0x30, 0x0f, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x01,
            0xa0, 0x02, 0x04, 0x00,
        ]
        #expect(self.code(data, verifier: verifier) == .malformedReceipt)
        #expect(self.code([0x05, 0x00], verifier: verifier) == .malformedReceipt)
    }

    @Test func publicKeyArgumentMustBeAPoint() throws {
        let verifier = try ReceiptVerifier()
        let error = #expect(throws: VerificationError.self) {
            try verifier.verify(receipt: try Self.realReceipt(), appID: nil, publicKey: [4, 1, 2], at: nil)
        }
        #expect(error?.code == .invalidPublicKey)
    }

    @Test func trustRootBundleMayHoldSeveralCertificates() throws {
        let url = try #require(Bundle.module.url(forResource: "Fixtures/apple_root_ca_g3", withExtension: "pem"))
        let apple = try String(contentsOf: url, encoding: .utf8)
        let bundle = apple + "\n" + SharedSimulator.authority.rootCertificatePEM
        let verifier = try ReceiptVerifier(additionalTrustRootsPEM: [bundle])
        let certificate = try ReceiptPayloadTests.attestedCertificate(try SimulatedDevice.generate())
        let simulated = try SharedSimulator.authority.receipt(
            attestedCertificate: certificate, appID: SharedSimulator.appID, clientHash: [1], environment: .production)
        #expect(try verifier.verify(receipt: simulated, appID: nil, publicKey: nil, at: nil).clientHash == [1])
        // A bad block after a good one spoils the bundle.
        let spoiled = bundle + "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
        #expect(throws: VerificationError.self) { try ReceiptVerifier(additionalTrustRootsPEM: [spoiled]) }
    }

    @Test func badTrustRootIsRejected() {
        let error = #expect(throws: VerificationError.self) {
            try ReceiptVerifier(additionalTrustRootsPEM: [
                "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----"
            ])
        }
        #expect(error?.code == .malformedCertificate)
    }
}

/// The payload parser, fed DER directly, and signed variants from the simulator.
@Suite struct ReceiptPayloadTests {
    static func field(_ type: Int, _ value: [UInt8], version: Int = 1) -> [UInt8] {
        let inner = [0x02, 0x01, UInt8(type), 0x02, 0x01, UInt8(version)] + octets(value)
        return [0x30] + length(inner.count) + inner
    }

    static func octets(_ value: [UInt8]) -> [UInt8] { [0x04] + length(value.count) + value }

    static func length(_ n: Int) -> [UInt8] {
        n < 128 ? [UInt8(n)] : n < 256 ? [0x81, UInt8(n)] : [0x82, UInt8(n >> 8), UInt8(n & 0xff)]
    }

    static func set(_ fields: [[UInt8]]) -> [UInt8] {
        let content = fields.flatMap { $0 }
        return [0x31] + length(content.count) + content
    }

    static func standardFields(except omitted: Set<Int> = [], overriding: [Int: [UInt8]] = [:]) -> [[UInt8]] {
        let values: [(Int, [UInt8])] = [
            (2, Array("ABCDE12345.com.example.app".utf8)),
            (3, [0x30, 0x00]),
            (4, [1, 2, 3]),
            (5, Array("dG9rZW4=".utf8)),
            (6, Array("ATTEST".utf8)),
            (7, Array("sandbox".utf8)),
            (12, Array("2024-02-07T21:08:56.308Z".utf8)),
            (21, Array("2024-05-07T21:08:56.308Z".utf8)),
        ]
        return values.filter { !omitted.contains($0.0) }.map { field($0.0, overriding[$0.0] ?? $0.1) }
    }

    @Test func parsesAllFields() throws {
        let payload = Self.set(
            Self.standardFields(overriding: [6: Array("RECEIPT".utf8)])
                + [Self.field(17, Array("42".utf8)), Self.field(19, Array("2024-02-08T21:08:56Z".utf8))])
        let receipt = try Receipt(payload: payload)
        #expect(receipt.appID == "ABCDE12345.com.example.app")
        #expect(receipt.attestedCertificate == [0x30, 0x00])
        #expect(receipt.clientHash == [1, 2, 3])
        #expect(receipt.token == "dG9rZW4=")
        #expect(receipt.type == .receipt)
        #expect(receipt.environment == "sandbox")
        #expect(receipt.creationTime == RFC3339.parse("2024-02-07T21:08:56.308Z"))
        #expect(receipt.riskMetric == 42)
        #expect(receipt.notBefore == RFC3339.parse("2024-02-08T21:08:56Z"))
        #expect(receipt.expirationTime == RFC3339.parse("2024-05-07T21:08:56.308Z"))
    }

    @Test(arguments: ReceiptField.required)
    func missingRequiredFieldIsReported(_ field: ReceiptField) {
        let payload = Self.set(Self.standardFields(except: [field.rawValue]))
        let error = #expect(throws: VerificationError.self) { try Receipt(payload: payload) }
        #expect(error?.code == .receiptFieldMissing)
    }

    @Test func nonMinimalLengthsInThePayloadAreTolerated() throws {
        // App ID field with its OCTET STRING length written as `81 1a` instead of `1a`.
        let appID = Array("ABCDE12345.com.example.app".utf8)
        let inner: [UInt8] = [0x02, 0x01, 0x02, 0x02, 0x01, 0x01, 0x04, 0x81, UInt8(appID.count)] + appID
        let field = [0x30, UInt8(inner.count)] + inner
        let payload = Self.set([field] + Self.standardFields(except: [2]))
        #expect(try Receipt(payload: payload).appID == "ABCDE12345.com.example.app")
        // Indefinite lengths are not.
        let fields: [UInt8] = Self.standardFields().flatMap { $0 }
        let indefinite: [UInt8] = [0x31, 0x80] + fields + [0x00, 0x00]
        let error = #expect(throws: VerificationError.self) { try Receipt(payload: indefinite) }
        #expect(error?.code == .malformedReceipt)
    }

    @Test func unknownFieldsAreSkipped() throws {
        let payload = Self.set(Self.standardFields() + [Self.field(99, [0xde, 0xad]), Self.field(1, [])])
        #expect(try Receipt(payload: payload).appID == "ABCDE12345.com.example.app")
    }

    @Test func malformedPayloads() {
        let cases: [(String, [UInt8])] = [
            ("duplicate field", Self.set(Self.standardFields() + [Self.field(2, Array("X.y".utf8))])),
            ("bad creation time", Self.set(Self.standardFields(overriding: [12: Array("yesterday".utf8)]))),
            (
                "bad expiration time",
                Self.set(Self.standardFields(overriding: [21: Array("2024-13-01T00:00:00Z".utf8)]))
            ),
            ("unknown type", Self.set(Self.standardFields(overriding: [6: Array("OTHER".utf8)]))),
            ("non-UTF-8 App ID", Self.set(Self.standardFields(overriding: [2: [0xff, 0xfe]]))),
            ("empty App ID", Self.set(Self.standardFields(overriding: [2: []]))),
            ("risk metric not a number", Self.set(Self.standardFields() + [Self.field(17, Array("2x".utf8))])),
            ("risk metric empty", Self.set(Self.standardFields() + [Self.field(17, [])])),
            ("SEQUENCE instead of SET", [0x30] + Array(Self.set(Self.standardFields()).dropFirst())),
            // SEQUENCE { INTEGER 9, INTEGER 1, OCTET STRING "", INTEGER 0 }
            (
                "attribute with four elements",
                Self.set(
                    Self.standardFields() + [
                        [0x30, 0x0b, 0x02, 0x01, 0x09, 0x02, 0x01, 0x01, 0x04, 0x00, 0x02, 0x01, 0x00]
                    ])
            ),
            (
                "value not an OCTET STRING",
                Self.set(Self.standardFields() + [[0x30, 0x08, 0x02, 0x01, 0x09, 0x02, 0x01, 0x01, 0x05, 0x00]])
            ),
            ("empty", []),
            ("trailing byte", Self.set(Self.standardFields()) + [0x00]),
        ]
        for (name, payload) in cases {
            let error = #expect(throws: VerificationError.self, "\(name)") { try Receipt(payload: payload) }
            #expect(error?.code == .malformedReceipt, "\(name): \(String(describing: error))")
        }
    }

    @Test(arguments: [1, 7, 100, 999, 1000, 4096])
    func chunkedContentVerifiesWhateverTheChunkSize(chunkSize: Int) throws {
        // Small chunks cut every field in half somewhere; the verifier must reassemble them.
        var options = ReceiptOptions()
        options.chunkSize = chunkSize
        options.creationTime = SharedSimulator.time
        let device = try SimulatedDevice.generate()
        let receipt = try SharedSimulator.authority.receipt(
            attestedCertificate: try Self.attestedCertificate(device), appID: SharedSimulator.appID,
            clientHash: [7, 7, 7], environment: .development, options: options)
        let parsed = try SharedSimulator.receiptVerifier().verify(
            receipt: receipt, appID: SharedSimulator.appID, publicKey: device.publicKey, at: nil)
        #expect(parsed.clientHash == [7, 7, 7])
        #expect(parsed.environment == "sandbox")
    }

    @Test func signedReceiptWithMissingFieldReportsIt() throws {
        var options = ReceiptOptions()
        options.omittedFields = [21]
        let receipt = try SharedSimulator.authority.receipt(
            attestedCertificate: [0x30, 0x00], appID: SharedSimulator.appID, clientHash: [1],
            environment: .production, options: options)
        let error = #expect(throws: VerificationError.self) {
            try SharedSimulator.receiptVerifier().verify(receipt: receipt, appID: nil, publicKey: nil, at: nil)
        }
        #expect(error?.code == .receiptFieldMissing)
    }

    @Test func signedReceiptWithUnparsableCertificateIsMalformed() throws {
        let receipt = try SharedSimulator.authority.receipt(
            attestedCertificate: [0x30, 0x00], appID: SharedSimulator.appID, clientHash: [1],
            environment: .production)
        let error = #expect(throws: VerificationError.self) {
            try SharedSimulator.receiptVerifier().verify(
                receipt: receipt, appID: nil, publicKey: [UInt8](repeating: 4, count: 65), at: nil)
        }
        #expect(error?.code == .malformedReceipt)
    }

    static func attestedCertificate(_ device: SimulatedDevice) throws -> [UInt8] {
        let attestation = try SharedSimulator.authority.attestation(
            for: device, appID: SharedSimulator.appID, clientDataHash: [1], environment: .development)
        let receipt = try SharedSimulator.receiptVerifier().verify(
            receipt: try AttestationObject(attestation).receipt, appID: nil, publicKey: nil, at: nil)
        return receipt.attestedCertificate
    }
}

@Suite struct ReceiptTimeTests {
    @Test func parsesRFC3339() throws {
        let base = try #require(RFC3339.parse("2020-11-21T22:13:02Z"))
        #expect(base.timeIntervalSince1970 == 1_605_996_782)
        #expect(RFC3339.parse("2020-11-21T22:13:02.796Z")?.timeIntervalSince1970 == 1_605_996_782.796)
        #expect(RFC3339.parse("2020-11-21 22:13:02.796000+00:00")?.timeIntervalSince1970 == 1_605_996_782.796)
        #expect(RFC3339.parse("2020-11-21T23:13:02+01:00") == base)
        #expect(RFC3339.parse("2020-11-21T21:13:02-01:00") == base)
        #expect(RFC3339.parse("2024-02-29T00:00:00Z") != nil)
        #expect(RFC3339.parse("1970-01-01T00:00:00Z")?.timeIntervalSince1970 == 0)
    }

    @Test(arguments: [
        "2020-11-21T22:13:02.796Z", "1970-01-01T00:00:00.000Z", "1969-12-31T23:59:59.999Z", "2024-02-29T12:00:00.001Z",
        "2000-03-01T00:00:00.000Z", "2100-12-31T23:59:59.500Z", "1900-02-28T10:00:00.000Z",
    ])
    func formatRoundTrips(_ text: String) throws {
        #expect(RFC3339.format(try #require(RFC3339.parse(text))) == text)
    }

    @Test func formatMatchesFoundation() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var generator = SplitMix64(seed: 3)
        for _ in 0..<1000 {
            let date = Date(timeIntervalSince1970: Double(generator.next() % 8_000_000_000) - 2_000_000_000)
            #expect(RFC3339.format(date) == formatter.string(from: date))
        }
    }

    @Test(arguments: [
        "", "2020-11-21", "2020-11-21T22:13:02", "2020-11-21T22:13Z", "2020-13-01T00:00:00Z",
        "2023-02-29T00:00:00Z", "2020-11-31T00:00:00Z", "2020-11-21T24:00:00Z", "2020-11-21T22:60:00Z",
        "2020-11-21T22:13:02.Z", "2020-11-21T22:13:02+0100", "2020-11-21T22:13:02Zjunk", "2020/11/21T22:13:02Z",
        "２020-11-21T22:13:02Z",
    ])
    func rejectsNonRFC3339(_ text: String) {
        #expect(RFC3339.parse(text) == nil)
    }
}
