import Foundation
import Testing

@testable import Verification

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
        var expired_at: String?
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
        let verifier = try AttestationVerifier(
            appIDs: [vector.app_id], environment: requirement,
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
                try verifier.verify(
                    assertionObject: object, clientDataHash: hash, publicKey: key,
                    appIDs: [AppID(vector.app_id)], previousCounter: vector.previous_counter)
            }
            #expect(error?.code.rawValue == code, "\(String(describing: error))")
        } else {
            let result = try verifier.verify(
                assertionObject: object, clientDataHash: hash, publicKey: key,
                appIDs: [AppID(vector.app_id)], previousCounter: vector.previous_counter)
            #expect(result.counter == vector.expected_counter)
        }
    }

    /// One verifier for every object, twice over: once the intermediate is cached, every
    /// outcome (and error code) must stay what a fresh verifier gives.
    @Test func sharedVerifierWithIntermediateCacheGivesTheSameResults() throws {
        let fixtures = try SyntheticFixtures.load()
        var verifiers: [String: AttestationVerifier] = [:]
        for requirement in EnvironmentRequirement.allCases {
            verifiers[requirement.rawValue] = try AttestationVerifier(
                appIDs: ["ABCDE12345.com.example.app"], environment: requirement,
                additionalTrustRootsPEM: [fixtures.meta.trust_root_pem])
        }
        for pass in 0..<2 {
            for vector in fixtures.attestations {
                let verifier = try #require(verifiers[vector.required_environment])
                let object = try VectorFixtures.base64(vector.attestation)
                let keyID = try VectorFixtures.base64(vector.key_id)
                let hash = try VectorFixtures.base64(vector.client_data_hash)
                let time = try VectorFixtures.date(vector.valid_at)
                do {
                    let key = try verifier.verify(
                        attestationObject: object, keyID: keyID, clientDataHash: hash, at: time)
                    #expect(vector.expected_error == nil, "pass \(pass) \(vector.id) verified")
                    #expect(key.publicKey == (try VectorFixtures.base64(vector.public_key_x962)))
                } catch {
                    #expect(
                        (error as? VerificationError)?.code.rawValue == vector.expected_error,
                        "pass \(pass) \(vector.id): \(error)")
                }
                if let expiredAt = vector.expired_at {
                    // Leaf still valid, intermediate and root expired: the cached intermediate must not hide it.
                    #expect(throws: VerificationError(.certificateExpired, ""), "pass \(pass) \(vector.id)") {
                        try verifier.verify(
                            attestationObject: object, keyID: keyID, clientDataHash: hash,
                            at: try VectorFixtures.date(expiredAt))
                    }
                }
            }
        }
        // The valid objects share one intermediate: exactly it is cached, by each verifier that saw it.
        #expect(verifiers["any"]?.trustStore.cachedIntermediateCount == 1)
    }

    @Test func realVectorsPopulateAndUseTheIntermediateCache() throws {
        for vector in try AttestationVector.all() where vector.expected_result == "valid" {
            let verifier = try AttestationVerifier(appIDs: [vector.app_id], environment: .any)
            let object = try AttestationObject(try VectorFixtures.base64(vector.attestation))
            let time = try VectorFixtures.date(vector.valid_at)
            #expect(verifier.trustStore.cachedIntermediateCount == 0)
            for _ in 0..<2 {
                _ = try verifier.verify(
                    attestationObject: try VectorFixtures.base64(vector.attestation),
                    keyID: try VectorFixtures.base64(vector.key_id),
                    clientDataHash: try VectorFixtures.base64(vector.client_data_hash), at: time)
            }
            #expect(verifier.trustStore.cachedIntermediateCount == 1)
            // The shortcut itself accepts the leaf under the intermediate, and only within validity.
            let leaf = try ParsedCertificate(der: object.certificates[0], label: "leaf")
            let intermediate = try ParsedCertificate(der: object.certificates[1], label: "intermediate")
            #expect(verifier.trustStore.verifyUnderVerifiedIntermediate(leaf: leaf, anchor: intermediate, at: time))
            #expect(
                !verifier.trustStore.verifyUnderVerifiedIntermediate(
                    leaf: leaf, anchor: intermediate,
                    at: try VectorFixtures.date(vector.leaf_not_after).addingTimeInterval(1)))
            #expect(!verifier.trustStore.verifyUnderVerifiedIntermediate(leaf: intermediate, anchor: leaf, at: time))
        }
    }

    @Test func aTrustRootFileMayHoldSeveralCertificates() throws {
        let fixtures = try SyntheticFixtures.load()
        let vector = try #require(fixtures.attestations.first { $0.expected_result == "valid" })
        let bundle = AppleAppAttestRoot.pem + "\n" + fixtures.meta.trust_root_pem
        let verifier = try AttestationVerifier(
            appIDs: [vector.app_id], environment: .any, additionalTrustRootsPEM: [bundle])
        let key = try verifier.verify(
            attestationObject: try VectorFixtures.base64(vector.attestation),
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
        #expect(
            object.authenticatorData.extensions?[textKey: "apple_validation_category_01"] == .byteString([3, 0, 0, 0]))
        // Decoded: category 3 (little-endian), bundle version "1", nothing else.
        #expect(object.authenticatorData.launchValidation == LaunchValidation(category: 3, bundleVersion: "1"))
    }

    /// Every synthetic vector that carries the iOS 27 entries reports them through the verifier.
    @Test func verifiedAttestationsReportLaunchValidation() throws {
        let fixtures = try SyntheticFixtures.load()
        var reported = 0
        for vector in fixtures.attestations where vector.expected_result == "valid" {
            let object = try AttestationObject(try VectorFixtures.base64(vector.attestation))
            let verifier = try AttestationVerifier(
                appIDs: [vector.app_id], environment: .any, additionalTrustRootsPEM: [fixtures.meta.trust_root_pem])
            let key = try verifier.verify(
                attestationObject: try VectorFixtures.base64(vector.attestation),
                keyID: try VectorFixtures.base64(vector.key_id),
                clientDataHash: try VectorFixtures.base64(vector.client_data_hash),
                at: try VectorFixtures.date(vector.valid_at))
            #expect(key.launchValidation == object.authenticatorData.launchValidation, "\(vector.id)")
            if key.launchValidation.category != nil { reported += 1 }
        }
        #expect(reported >= 1, "no synthetic vector carries a launch validation category")
    }
}
