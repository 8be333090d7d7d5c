import Foundation
import Testing
import Verification

@Suite struct AssertionVectorTests {
    static let codeForNegativeKind: [String: VerificationError.Code] = [
        "replay": .counterNotIncreasing,
        "clientdata": .invalidSignature,
        "appid": .appIDMismatch,
        "wrongkey": .invalidSignature,
    ]

    @Test(arguments: try AssertionVector.all())
    func vectorGivesExpectedResult(_ vector: AssertionVector) throws {
        let key = try ECPublicKey(pem: vector.public_key)
        let assertion = try VectorFixtures.base64(vector.assertion)
        let clientDataHash = SHA256.hash(try VectorFixtures.base64(vector.client_data))
        let verifier = AssertionVerifier()

        switch vector.expected_result {
        case "valid":
            let result = try verifier.verify(
                assertionObject: assertion, clientDataHash: clientDataHash, publicKey: key,
                appIDs: [AppID(vector.app_id)], previousCounter: vector.previous_counter)
            #expect(result.counter == vector.expected_counter)
            #expect(result.appID == vector.app_id)
            // The one-App-ID form (the gateway's, no array per request) agrees.
            let single = try verifier.verify(
                assertionObject: assertion, clientDataHash: clientDataHash, publicKey: key,
                appID: AppID(vector.app_id), previousCounter: vector.previous_counter)
            #expect(single == result)
        case "invalid":
            let error = #expect(throws: VerificationError.self) {
                try verifier.verify(
                    assertionObject: assertion, clientDataHash: clientDataHash, publicKey: key,
                    appIDs: [AppID(vector.app_id)], previousCounter: vector.previous_counter)
            }
            if let kind = vector.negative_kind, let code = Self.codeForNegativeKind[kind] {
                #expect(error?.code == code, "\(vector.id): \(String(describing: error))")
            }
            let single = #expect(throws: VerificationError.self) {
                try verifier.verify(
                    assertionObject: assertion, clientDataHash: clientDataHash, publicKey: key,
                    appID: AppID(vector.app_id), previousCounter: vector.previous_counter)
            }
            #expect(single?.code == error?.code, "\(vector.id): the one-App-ID form")
        default:
            Issue.record("unknown expected_result \(vector.expected_result)")
        }
    }

    @Test func pemAndX962KeysAreTheSameKey() throws {
        for vector in try AttestationVector.all() where vector.expected_result == "valid" {
            // attestations.json carries each key both ways.
            let x962 = try VectorFixtures.base64(vector.expected.public_key_x962)
            let fromPoint = try ECPublicKey(x962: x962)
            #expect(fromPoint.x962 == x962)
        }
        for vector in try AssertionVector.all() {
            let key = try ECPublicKey(pem: vector.public_key)
            #expect(key.x962.count == 65 && key.x962[0] == 0x04)
            #expect((try ECPublicKey(x962: key.x962)).x962 == key.x962)
        }
    }

    @Test func signatureIsOverTheNonceNotThePrehashedNonceNorTheConcatenation() throws {
        // DESIGN.md assertion step 2: verifying the wrong message must reject real assertions.
        let vector = try #require(try AssertionVector.all().first { $0.expected_result == "valid" })
        let key = try ECPublicKey(pem: vector.public_key)
        let object = try AssertionObject(try VectorFixtures.base64(vector.assertion))
        let clientDataHash = SHA256.hash(try VectorFixtures.base64(vector.client_data))
        let concatenation = object.authenticatorData.rawValue + clientDataHash
        let nonce = SHA256.hash(concatenation)
        #expect(key.isValidSignature(object.signature, for: nonce))
        #expect(!key.isValidSignature(object.signature, for: concatenation))
        #expect(!key.isValidSignature(object.signature, for: SHA256.hash(nonce)))
        #expect(!key.isValidSignature(Array(object.signature.dropLast()), for: nonce))
        #expect(!key.isValidSignature([], for: nonce))
    }

    @Test func realAssertionsSetFlagATWithoutCredentialData() throws {
        for vector in try AssertionVector.all() {
            let object = try AssertionObject(try VectorFixtures.base64(vector.assertion))
            #expect(object.authenticatorData.flags.contains(.attestedCredentialData))
            #expect(object.authenticatorData.attestedCredentialData == nil)
            #expect(object.authenticatorData.rawValue.count == 37)
        }
    }

    @Test func counterMustStrictlyIncrease() throws {
        let vector = try #require(try AssertionVector.all().first { $0.expected_result == "valid" })
        let key = try ECPublicKey(pem: vector.public_key)
        let assertion = try VectorFixtures.base64(vector.assertion)
        let clientDataHash = SHA256.hash(try VectorFixtures.base64(vector.client_data))
        let verifier = AssertionVerifier()
        let counter = vector.expected_counter
        let ok = try verifier.verify(
            assertionObject: assertion, clientDataHash: clientDataHash, publicKey: key,
            appIDs: [AppID("A.b"), AppID(vector.app_id)], previousCounter: counter - 1)
        #expect(ok.counter == counter)
        for previous in [counter, counter + 1, UInt32.max] {
            #expect(throws: VerificationError(.counterNotIncreasing, "")) {
                try verifier.verify(
                    assertionObject: assertion, clientDataHash: clientDataHash, publicKey: key,
                    appIDs: [AppID(vector.app_id)], previousCounter: previous)
            }
        }
        #expect(throws: VerificationError(.appIDMismatch, "")) {
            try verifier.verify(
                assertionObject: assertion, clientDataHash: clientDataHash, publicKey: key,
                appIDs: [], previousCounter: 0)
        }
    }
}
