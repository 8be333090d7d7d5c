import Foundation
import Testing
import Verification

@Suite struct AttestationVectorTests {
    /// The check each kind of altered vector must fail, by DESIGN.md's numbering.
    static let codeForNegativeKind: [String: VerificationError.Code] = [
        "challenge": .nonceMismatch,
        "hashedchallenge": .nonceMismatch,
        "appid": .appIDMismatch,
        "keyid": .keyIDMismatch,
        "expired": .certificateExpired,
        "env": .environmentMismatch,
    ]

    @Test(arguments: try AttestationVector.all())
    func vectorGivesExpectedResult(_ vector: AttestationVector) throws {
        let requirement = try #require(EnvironmentRequirement(rawValue: vector.required_environment ?? "any"))
        let verifier = try AttestationVerifier(appIDs: [vector.app_id], environment: requirement)
        let attestation = try VectorFixtures.base64(vector.attestation)
        let keyID = try VectorFixtures.base64(vector.key_id)
        let clientDataHash = try VectorFixtures.base64(vector.client_data_hash)
        let time = try VectorFixtures.date(vector.valid_at)

        switch vector.expected_result {
        case "valid":
            let key = try verifier.verify(
                attestationObject: attestation, keyID: keyID, clientDataHash: clientDataHash, at: time)
            #expect(key.keyID == keyID)
            #expect(key.publicKey == (try VectorFixtures.base64(vector.expected.public_key_x962)))
            #expect(SHA256.hash(key.publicKey) == keyID)
            #expect(key.appID == vector.app_id)
            #expect(key.environment.rawValue == vector.environment)
            #expect(key.receipt.count == vector.expected.receipt_len)
            #expect(key.certificateNotAfter == (try VectorFixtures.date(vector.leaf_not_after)))
        case "invalid":
            let error = #expect(throws: VerificationError.self) {
                try verifier.verify(
                    attestationObject: attestation, keyID: keyID, clientDataHash: clientDataHash, at: time)
            }
            if let kind = vector.negative_kind, let code = Self.codeForNegativeKind[kind] {
                #expect(error?.code == code, "\(vector.id): \(String(describing: error))")
            }
        default:
            Issue.record("unknown expected_result \(vector.expected_result)")
        }
    }

    @Test func embeddedRootIsTheFixture() throws {
        let fixture = try VectorFixtures.text("apple_app_attest_root_ca.pem")
        #expect(
            AppleAppAttestRoot.pem.trimmingCharacters(in: .whitespacesAndNewlines)
                == fixture.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test func everyValidVectorFailsOutsideItsLeafValidity() throws {
        for vector in try AttestationVector.all() where vector.expected_result == "valid" {
            let verifier = try AttestationVerifier(appIDs: [vector.app_id], environment: .any)
            let attestation = try VectorFixtures.base64(vector.attestation)
            let keyID = try VectorFixtures.base64(vector.key_id)
            let clientDataHash = try VectorFixtures.base64(vector.client_data_hash)
            let notAfter = try VectorFixtures.date(vector.leaf_not_after)
            #expect(throws: VerificationError(.certificateExpired, "")) {
                try verifier.verify(
                    attestationObject: attestation, keyID: keyID, clientDataHash: clientDataHash,
                    at: notAfter.addingTimeInterval(1))
            }
            #expect(throws: VerificationError(.certificateExpired, "")) {
                try verifier.verify(
                    attestationObject: attestation, keyID: keyID, clientDataHash: clientDataHash,
                    at: Date(timeIntervalSince1970: 1_500_000_000))
            }
            // One second before notAfter: still valid.
            _ = try verifier.verify(
                attestationObject: attestation, keyID: keyID, clientDataHash: clientDataHash,
                at: notAfter.addingTimeInterval(-1))
        }
    }

    @Test func environmentRequirementIsEnforcedBothWays() throws {
        for vector in try AttestationVector.all() where vector.expected_result == "valid" {
            let attestation = try VectorFixtures.base64(vector.attestation)
            let keyID = try VectorFixtures.base64(vector.key_id)
            let clientDataHash = try VectorFixtures.base64(vector.client_data_hash)
            let time = try VectorFixtures.date(vector.valid_at)
            for requirement in EnvironmentRequirement.allCases {
                let verifier = try AttestationVerifier(appIDs: ["X.other", vector.app_id], environment: requirement)
                if requirement == .any || requirement.rawValue == vector.environment {
                    let key = try verifier.verify(
                        attestationObject: attestation, keyID: keyID, clientDataHash: clientDataHash, at: time)
                    #expect(key.appID == vector.app_id)
                } else {
                    #expect(throws: VerificationError(.environmentMismatch, "")) {
                        try verifier.verify(
                            attestationObject: attestation, keyID: keyID, clientDataHash: clientDataHash, at: time)
                    }
                }
            }
        }
    }
}
