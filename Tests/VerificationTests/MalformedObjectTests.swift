import Foundation
import Testing
import Verification

/// Hostile inputs to the object parsers and verifiers: each must be a typed error.
@Suite struct MalformedObjectTests {
    static let malformedCodes: Set<VerificationError.Code> = [
        .malformedCBOR, .malformedAttestation, .malformedAssertion, .malformedAuthenticatorData, .malformedCertificate,
    ]

    func realAttestation() throws -> (AttestationVector, [UInt8]) {
        let vector = try #require(try AttestationVector.all().first { $0.expected_result == "valid" })
        return (vector, try VectorFixtures.base64(vector.attestation))
    }

    func realAssertion() throws -> (AssertionVector, [UInt8]) {
        let vector = try #require(try AssertionVector.all().first { $0.expected_result == "valid" })
        return (vector, try VectorFixtures.base64(vector.assertion))
    }

    /// CBOR text string head + bytes.
    static func text(_ s: String) -> [UInt8] {
        let bytes = Array(s.utf8)
        precondition(bytes.count < 24)
        return [0x60 | UInt8(bytes.count)] + bytes
    }

    static func bytes(_ b: [UInt8]) -> [UInt8] {
        precondition(b.count < 65536)
        return [0x59, UInt8(b.count >> 8), UInt8(b.count & 0xff)] + b
    }

    @Test func truncatedAttestationAtEveryLengthIsMalformed() throws {
        let (_, attestation) = try realAttestation()
        for length in 0..<attestation.count {
            #expect(throws: VerificationError(.malformedAttestation, "")) {
                try AttestationObject(Array(attestation.prefix(length)))
            }
        }
    }

    @Test func truncatedAssertionAtEveryLengthIsMalformed() throws {
        let (_, assertion) = try realAssertion()
        for length in 0..<assertion.count {
            #expect(throws: VerificationError(.malformedAssertion, "")) {
                try AssertionObject(Array(assertion.prefix(length)))
            }
        }
    }

    @Test func trailingBytesAfterObjectsAreRejected() throws {
        let (_, attestation) = try realAttestation()
        let (_, assertion) = try realAssertion()
        #expect(throws: VerificationError(.malformedAttestation, "")) { try AttestationObject(attestation + [0x00]) }
        #expect(throws: VerificationError(.malformedAssertion, "")) { try AssertionObject(assertion + [0xa0]) }
    }

    @Test func wrongTypesInTheAttestationObject() throws {
        let fmt = Self.text("fmt") + Self.text("apple-appattest")
        let authData = Self.text("authData") + Self.bytes([UInt8](repeating: 0, count: 37))
        let cases: [([UInt8], VerificationError.Code)] = [
            ([0x80], .malformedAttestation),  // array, not map
            ([0xa0], .malformedAttestation),  // empty map
            ([0xa1] + Self.text("fmt") + [0x01], .malformedAttestation),  // fmt not text
            ([0xa1] + Self.text("fmt") + Self.text("packed"), .unsupportedFormat),
            ([0xa1] + Self.text("fmt") + Self.text("none"), .unsupportedFormat),
            ([0xa2] + fmt + Self.text("attStmt") + [0x80], .malformedAttestation),  // attStmt array
            ([0xa2] + fmt + Self.text("attStmt") + [0xa1] + Self.text("x5c") + [0x41, 0x00], .malformedAttestation),
            // empty x5c
            ([0xa2] + fmt + Self.text("attStmt") + [0xa1] + Self.text("x5c") + [0x80], .malformedAttestation),
            ([0xa2] + fmt + Self.text("attStmt") + [0xa1] + Self.text("x5c") + [0x81, 0x01], .malformedAttestation),
            (
                [0xa2] + fmt + Self.text("attStmt") + [0xa1] + Self.text("x5c") + [0x81, 0x41, 0x00],
                .malformedAttestation
            ),  // no receipt
            (
                [0xa3] + fmt + Self.text("attStmt") + [0xa2] + Self.text("x5c") + [0x81, 0x41, 0x00]
                    + Self.text("receipt") + [0x01]
                    + authData, .malformedAttestation
            ),  // receipt not bytes
            (
                [0xa2] + fmt + Self.text("attStmt") + [0xa2] + Self.text("x5c") + [0x81, 0x41, 0x00]
                    + Self.text("receipt") + [0x40],
                .malformedAttestation
            ),  // no authData
            (
                [0xa3] + fmt + Self.text("attStmt") + [0xa2] + Self.text("x5c") + [0x81, 0x41, 0x00]
                    + Self.text("receipt") + [0x40]
                    + Self.text("authData") + Self.text("x"), .malformedAttestation
            ),  // authData text
            (
                [0xa3] + fmt + Self.text("attStmt") + [0xa2] + Self.text("x5c") + [0x81, 0x41, 0x00]
                    + Self.text("receipt") + [0x40]
                    + authData, .malformedAuthenticatorData
            ),  // authData without AT
        ]
        for (bytes, code) in cases {
            #expect(throws: VerificationError(code, ""), "\(bytes.prefix(24))") { try AttestationObject(bytes) }
        }
    }

    @Test func wrongTypesInTheAssertionObject() throws {
        let signature = Self.text("signature") + Self.bytes([0x30, 0x00])
        let cases: [([UInt8], VerificationError.Code)] = [
            ([0x80], .malformedAssertion),
            ([0xa0], .malformedAssertion),
            ([0xa1] + Self.text("signature") + Self.text("x"), .malformedAssertion),
            ([0xa1] + Self.text("signature") + [0x40], .malformedAssertion),  // empty signature
            ([0xa1] + signature, .malformedAssertion),  // no authenticatorData
            ([0xa2] + signature + Self.text("authenticatorData") + [0x80], .malformedAssertion),
            ([0xa2] + signature + Self.text("authenticatorData") + Self.bytes([1, 2, 3]), .malformedAuthenticatorData),
        ]
        for (bytes, code) in cases {
            #expect(throws: VerificationError(code, ""), "\(bytes.prefix(24))") { try AssertionObject(bytes) }
        }
    }

    @Test func oversizedLengthsInsideTheAttestation() throws {
        let (vector, attestation) = try realAttestation()
        // Rewrite the first byte-string length head we find (x5c[0]: 0x59 hi lo) to claim 0xffff.
        let index = try #require(attestation.firstIndex(of: 0x59))
        var forged = attestation
        forged[index + 1] = 0xff
        forged[index + 2] = 0xff
        let verifier = try AttestationVerifier(appIDs: [vector.app_id], environment: .any)
        let error = #expect(throws: VerificationError.self) {
            try verifier.verify(attestationObject: forged, keyID: [], clientDataHash: [], at: Date())
        }
        #expect(error.map { Self.malformedCodes.contains($0.code) } == true)
    }

    @Test func deeplyNestedInputIsRejectedWithoutCrashing() {
        let deep = [UInt8](repeating: 0xa1, count: 50_000)
        #expect(throws: VerificationError(.malformedAttestation, "")) { try AttestationObject(deep) }
        #expect(throws: VerificationError(.malformedAssertion, "")) { try AssertionObject(deep) }
    }

    @Test func corruptedAttestationBytesGiveTypedErrors() throws {
        let (vector, attestation) = try realAttestation()
        let verifier = try AttestationVerifier(appIDs: [vector.app_id], environment: .any)
        let keyID = try VectorFixtures.base64(vector.key_id)
        let clientDataHash = try VectorFixtures.base64(vector.client_data_hash)
        let time = try VectorFixtures.date(vector.valid_at)
        var rejected = 0
        // Every 5th byte flipped (a whole pass takes ~1 s in debug builds).
        for index in stride(from: 0, to: attestation.count, by: 5) {
            var corrupted = attestation
            corrupted[index] ^= 0x5a
            do {
                _ = try verifier.verify(
                    attestationObject: corrupted, keyID: keyID, clientDataHash: clientDataHash, at: time)
            } catch {
                rejected += 1
            }
        }
        // Only bytes inside the receipt (not covered by the checks above) may be flipped unnoticed.
        #expect(rejected > attestation.count / 5 - 3800 / 5)
    }

    @Test func corruptedAssertionBytesAreAllRejected() throws {
        let (vector, assertion) = try realAssertion()
        let key = try ECPublicKey(pem: vector.public_key)
        let clientDataHash = SHA256.hash(try VectorFixtures.base64(vector.client_data))
        for index in 0..<assertion.count {
            for mask: UInt8 in [0x01, 0x80, 0xff] {
                var corrupted = assertion
                corrupted[index] ^= mask
                #expect(throws: VerificationError.self, "byte \(index) ^ \(mask)") {
                    try AssertionVerifier().verify(
                        assertionObject: corrupted, clientDataHash: clientDataHash, publicKey: key,
                        appIDs: [AppID(vector.app_id)], previousCounter: 0)
                }
            }
        }
    }

    @Test func randomBytesGiveTypedErrors() throws {
        var generator = SplitMix64(seed: 42)
        let verifier = try AttestationVerifier(appIDs: ["A.b"], environment: .any)
        let key = try ECPublicKey(pem: try #require(try AssertionVector.all().first).public_key)
        for _ in 0..<5_000 {
            let length = Int(generator.next() % 300)
            var bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            if !bytes.isEmpty { bytes[0] = 0xa0 | (bytes[0] & 0x03) }  // start like a small map to get past byte 0
            #expect(throws: VerificationError.self) {
                try verifier.verify(attestationObject: bytes, keyID: [], clientDataHash: [], at: Date())
            }
            #expect(throws: VerificationError.self) {
                try AssertionVerifier().verify(
                    assertionObject: bytes, clientDataHash: [], publicKey: key, appIDs: [], previousCounter: 0)
            }
        }
    }

    @Test func publicKeysThatAreNotP256PointsAreRejected() {
        #expect(throws: VerificationError(.invalidPublicKey, "")) { try ECPublicKey(x962: []) }
        #expect(throws: VerificationError(.invalidPublicKey, "")) {
            try ECPublicKey(x962: [0x04] + [UInt8](repeating: 0, count: 64))
        }
        #expect(throws: VerificationError(.invalidPublicKey, "")) {
            try ECPublicKey(x962: [0x04] + [UInt8](repeating: 1, count: 64))
        }
        #expect(throws: VerificationError(.invalidPublicKey, "")) {
            try ECPublicKey(x962: [0x02] + [UInt8](repeating: 1, count: 32))
        }
        #expect(throws: VerificationError(.invalidPublicKey, "")) { try ECPublicKey(pem: "not a pem") }
        #expect(throws: VerificationError(.invalidPublicKey, "")) {
            try ECPublicKey(pem: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
        }
    }

    @Test func verifierNeedsAppIDsAndParsableExtraRoots() {
        #expect(throws: VerificationError(.invalidInput, "")) { try AttestationVerifier(appIDs: [], environment: .any) }
        #expect(throws: VerificationError(.malformedCertificate, "")) {
            try AttestationVerifier(appIDs: ["A.b"], environment: .any, additionalTrustRootsPEM: ["garbage"])
        }
    }
}
