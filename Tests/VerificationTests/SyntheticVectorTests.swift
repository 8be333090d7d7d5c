import Foundation
import Testing
import Verification

/// Objects minted by Fixtures/synthetic/generate.py under a throwaway test CA: the shapes
/// and failures the real vectors do not cover, each with the exact error code expected.
struct SyntheticFixtures: Decodable, Sendable {
    struct Meta: Decodable, Sendable { var trust_root_pem: String }
    struct Attestation: Decodable, Sendable, CustomTestStringConvertible {
        var id: String
        var app_id: String
        var key_id: String
        var client_data_hash: String
        var attestation: String
        var valid_at: String
        var required_environment: String
        var expected_result: String
        var expected_error: String?
        var environment: String
        var public_key_x962: String
        var testDescription: String { self.id }
    }
    struct Assertion: Decodable, Sendable, CustomTestStringConvertible {
        var id: String
        var app_id: String
        var client_data: String
        var assertion: String
        var public_key_x962: String
        var previous_counter: UInt32
        var expected_counter: UInt32
        var expected_result: String
        var expected_error: String?
        var testDescription: String { self.id }
    }
    var meta: Meta
    var attestations: [Attestation]
    var assertions: [Assertion]

    static func load() throws -> SyntheticFixtures {
        try JSONDecoder().decode(SyntheticFixtures.self, from: VectorFixtures.data("synthetic_attestations.json"))
    }
}

@Suite struct SyntheticVectorTests {
    @Test(arguments: try SyntheticFixtures.load().attestations)
    func attestationGivesExpectedResult(_ vector: SyntheticFixtures.Attestation) throws {
        let fixtures = try SyntheticFixtures.load()
        let requirement = try #require(EnvironmentRequirement(rawValue: vector.required_environment))
        let verifier = try AttestationVerifier(appIDs: [vector.app_id], environment: requirement,
                                               additionalTrustRootsPEM: [fixtures.meta.trust_root_pem])
        let object = try VectorFixtures.base64(vector.attestation)
        let keyID = try VectorFixtures.base64(vector.key_id)
        let hash = try VectorFixtures.base64(vector.client_data_hash)
        let time = try VectorFixtures.date(vector.valid_at)
        if let code = vector.expected_error {
            let error = #expect(throws: VerificationError.self) {
                try verifier.verify(attestationObject: object, keyID: keyID, clientDataHash: hash, at: time)
            }
            #expect(error?.code.rawValue == code, "\(String(describing: error))")
        } else {
            let key = try verifier.verify(attestationObject: object, keyID: keyID, clientDataHash: hash, at: time)
            #expect(key.publicKey == (try VectorFixtures.base64(vector.public_key_x962)))
            #expect(key.environment.rawValue == vector.environment)
            #expect(key.appID == vector.app_id)
            // The same object is refused without the test root: only Apple's root is pinned.
            let pinnedOnly = try AttestationVerifier(appIDs: [vector.app_id], environment: .any)
            #expect(throws: VerificationError(.certificateChainInvalid, "")) {
                try pinnedOnly.verify(attestationObject: object, keyID: keyID, clientDataHash: hash, at: time)
            }
        }
    }

    @Test(arguments: try SyntheticFixtures.load().assertions)
    func assertionGivesExpectedResult(_ vector: SyntheticFixtures.Assertion) throws {
        let key = try ECPublicKey(x962: try VectorFixtures.base64(vector.public_key_x962))
        let object = try VectorFixtures.base64(vector.assertion)
        let hash = SHA256.hash(try VectorFixtures.base64(vector.client_data))
        let verifier = AssertionVerifier()
        if let code = vector.expected_error {
            let error = #expect(throws: VerificationError.self) {
                try verifier.verify(assertionObject: object, clientDataHash: hash, publicKey: key,
                                    appIDs: [AppID(vector.app_id)], previousCounter: vector.previous_counter)
            }
            #expect(error?.code.rawValue == code, "\(String(describing: error))")
        } else {
            let result = try verifier.verify(assertionObject: object, clientDataHash: hash, publicKey: key,
                                             appIDs: [AppID(vector.app_id)], previousCounter: vector.previous_counter)
            #expect(result.counter == vector.expected_counter)
        }
    }

    @Test func aTrustRootFileMayHoldSeveralCertificates() throws {
        let fixtures = try SyntheticFixtures.load()
        let vector = try #require(fixtures.attestations.first { $0.expected_result == "valid" })
        let bundle = AppleAppAttestRoot.pem + "\n" + fixtures.meta.trust_root_pem
        let verifier = try AttestationVerifier(appIDs: [vector.app_id], environment: .any, additionalTrustRootsPEM: [bundle])
        let key = try verifier.verify(attestationObject: try VectorFixtures.base64(vector.attestation),
                                      keyID: try VectorFixtures.base64(vector.key_id),
                                      clientDataHash: try VectorFixtures.base64(vector.client_data_hash),
                                      at: try VectorFixtures.date(vector.valid_at))
        #expect(key.appID == vector.app_id)
    }

    @Test func extensionsAfterTheCOSEKeyAreExposed() throws {
        let vector = try #require(try SyntheticFixtures.load().attestations.first { $0.id == "syn-att-ext-no-ed" })
        let object = try AttestationObject(try VectorFixtures.base64(vector.attestation))
        #expect(!object.authenticatorData.flags.contains(.extensionData))
        #expect(object.authenticatorData.extensions?[textKey: "apple_bundle_version_01"] == .textString("1"))
        #expect(object.authenticatorData.extensions?[textKey: "apple_validation_category_01"] == .byteString([3, 0, 0, 0]))
    }
}
