import Foundation
import Testing
import Verification

/// Every real receipt in Fixtures/receipts.json gives its `expected_result`.
///
/// How `valid_at` is used: the verifier checks a receipt's chain at the receipt's own creation
/// time (field 12), so each vector is verified with `at: nil`. `valid_at` is the vector's
/// creation time truncated to the second (or + 1 minute): each vector is verified a second
/// time with `at: valid_at` and must give the same result, which shows that the explicit-time
/// path agrees with the creation-time path whenever the signing certificate is valid.
@Suite struct ReceiptVectorTests {
    static let vectors = ReceiptVector.all

    @Test func vectorsAreLoaded() throws {
        let vectors = try ReceiptVector.loadAll()
        #expect(vectors.count >= 24)
        #expect(vectors.contains { $0.expectedValid })
        #expect(vectors.contains { !$0.expectedValid })
    }

    @Test(arguments: vectors)
    func vectorGivesExpectedResult(_ vector: ReceiptVector) throws {
        let verifier = try ReceiptVerifier()
        let publicKey = try TestPEM.x962(fromSPKI: vector.publicKeyPEM)
        for time in [nil, vector.validAt] as [Date?] {
            if vector.expectedValid {
                let receipt = try verifier.verify(
                    receipt: vector.receipt, appID: vector.appID, publicKey: publicKey, at: time)
                try Self.check(receipt, against: vector)
            } else {
                let expectedCode: VerificationError.Code =
                    switch vector.negativeKind {
                    case "wrongkey": .receiptPublicKeyMismatch
                    case "appid": .receiptAppIDMismatch
                    case "tampered": .receiptSignatureInvalid
                    default: .malformedReceipt
                    }
                let error = #expect(throws: VerificationError.self) {
                    try verifier.verify(receipt: vector.receipt, appID: vector.appID, publicKey: publicKey, at: time)
                }
                #expect(error?.code == expectedCode, "\(vector.id): \(String(describing: error))")
            }
        }
    }

    static func check(_ receipt: Receipt, against vector: ReceiptVector) throws {
        #expect(receipt.appID == vector.appID)
        // The attested certificate's key is the vector's key (checked by the verifier, re-checked here).
        #expect(!receipt.attestedCertificate.isEmpty)
        for (key, value) in vector.expected {
            switch (key, value) {
            case ("type", .string(let s)): #expect(receipt.type.rawValue == s)
            case ("environment", .string(let s)): #expect(receipt.environment == s)
            case ("token", .string(let s)): #expect(receipt.token == s)
            case ("clientHashBase64", .string(let s)):
                #expect(receipt.clientHash == [UInt8](Data(base64Encoded: s) ?? Data()))
            case ("riskMetric", .number(let n)): #expect(receipt.riskMetric == n)
            case ("riskMetric", .null): #expect(receipt.riskMetric == nil)
            case ("notBefore", .null): #expect(receipt.notBefore == nil)
            case ("notBefore", .string(let s)): try Self.expectSameTime(receipt.notBefore, s)
            case ("creationTime", .string(let s)): try Self.expectSameTime(receipt.creationTime, s)
            case ("expirationTime", .string(let s)): try Self.expectSameTime(receipt.expirationTime, s)
            default: Issue.record("\(vector.id): unhandled expectation \(key) = \(value)")
            }
        }
        if receipt.type == .attest {
            // ATTEST receipts live 90 days and carry no risk metric.
            #expect(receipt.riskMetric == nil)
            #expect(abs(receipt.expirationTime.timeIntervalSince(receipt.creationTime) - 90 * 86_400) < 1)
        }
    }

    static func expectSameTime(_ actual: Date?, _ expectedText: String) throws {
        let expected = try #require(parseVectorTime(expectedText), "unparsable time \(expectedText)")
        let actual = try #require(actual)
        #expect(abs(actual.timeIntervalSince(expected)) < 0.001, "\(actual) vs \(expectedText)")
    }

    @Test func pinnedRootIsAppleRootCAG3() throws {
        // The fixture and the embedded constant are the same certificate: a receipt verifies with
        // the embedded root and no extra roots, and the fixture's DER hashes to Apple's published
        // fingerprint 63:34:3A:BF:...:91:79.
        let url = try #require(Bundle.module.url(forResource: "Fixtures/apple_root_ca_g3", withExtension: "pem"))
        let der = try TestPEM.der(String(contentsOf: url, encoding: .utf8))
        #expect(SHA256.hash(der).hexString == "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179")
    }

    @Test func verificationTimeOutsideSignerValidityFailsChain() throws {
        let vector = try #require(try ReceiptVector.loadAll().first { $0.id == "rcpt-01" })
        let verifier = try ReceiptVerifier()
        // The 2020 receipt-signing certificate expired in June 2021.
        let later = try #require(RFC3339.parse("2022-01-01T00:00:00Z"))
        let error = #expect(throws: VerificationError.self) {
            try verifier.verify(receipt: vector.receipt, appID: nil, publicKey: nil, at: later)
        }
        #expect(error?.code == .receiptChainInvalid)
        let earlier = try #require(RFC3339.parse("2019-01-01T00:00:00Z"))
        let error2 = #expect(throws: VerificationError.self) {
            try verifier.verify(receipt: vector.receipt, appID: nil, publicKey: nil, at: earlier)
        }
        #expect(error2?.code == .receiptChainInvalid)
    }

    @Test func appIDAndKeyAreOptional() throws {
        let vector = try #require(try ReceiptVector.loadAll().first { $0.id == "rcpt-27" })
        let receipt = try ReceiptVerifier().verify(receipt: vector.receipt, appID: nil, publicKey: nil, at: nil)
        #expect(receipt.appID == "0352187391.com.apple.example_app_attest")
        #expect(receipt.environment == "production")
        #expect(receipt.clientHash == Array("test_server_challenge".utf8))
    }
}
