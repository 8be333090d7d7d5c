import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Verification

@Suite struct ConcurrencyAndErrorQueueTests {
    @Test func oneKeyAndOneVerifierAreUsableFromManyThreads() throws {
        let assertionVector = try #require(try AssertionVector.all().first { $0.expected_result == "valid" })
        let key = try ECPublicKey(pem: assertionVector.public_key)
        let assertion = try VectorFixtures.base64(assertionVector.assertion)
        let goodHash = SHA256.hash(try VectorFixtures.base64(assertionVector.client_data))
        let badHash = SHA256.hash(goodHash)
        let appIDs = [AppID(assertionVector.app_id)]

        let attestationVector = try #require(try AttestationVector.all().first { $0.expected_result == "valid" })
        let attestation = try VectorFixtures.base64(attestationVector.attestation)
        let keyID = try VectorFixtures.base64(attestationVector.key_id)
        let attestationHash = try VectorFixtures.base64(attestationVector.client_data_hash)
        let time = try VectorFixtures.date(attestationVector.valid_at)
        let verifier = try AttestationVerifier(appIDs: [attestationVector.app_id], environment: .any)

        let wrong = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for round in 0..<40 {
                let useGood = (worker + round) % 2 == 0
                let result = try? AssertionVerifier().verify(
                    assertionObject: assertion, clientDataHash: useGood ? goodHash : badHash,
                    publicKey: key, appIDs: appIDs, previousCounter: 0)
                if (result != nil) != useGood { wrong.withLock { $0 += 1 } }
                if round % 8 == 0 {
                    let key = try? verifier.verify(
                        attestationObject: attestation, keyID: keyID, clientDataHash: attestationHash, at: time)
                    if key?.appID != attestationVector.app_id { wrong.withLock { $0 += 1 } }
                }
                if !OpenSSLErrorQueue.isEmpty { wrong.withLock { $0 += 1 } }
            }
        }
        #expect(wrong.withLock { $0 } == 0)
    }

    @Test func failingPathsLeaveTheOpenSSLErrorQueueEmpty() throws {
        let vector = try #require(try AttestationVector.all().first { $0.expected_result == "valid" })
        let attestation = try VectorFixtures.base64(vector.attestation)
        let keyID = try VectorFixtures.base64(vector.key_id)
        let hash = try VectorFixtures.base64(vector.client_data_hash)
        let verifier = try AttestationVerifier(appIDs: [vector.app_id], environment: .any)

        // Expired, wrong trust root, corrupt certificate, bad keys, bad signatures.
        _ = try? verifier.verify(
            attestationObject: attestation, keyID: keyID, clientDataHash: hash, at: Date(timeIntervalSince1970: 0))
        #expect(OpenSSLErrorQueue.isEmpty)
        var corrupt = attestation
        if let index = corrupt.firstIndex(of: 0x59) { corrupt[index + 5] ^= 0xff }
        _ = try? verifier.verify(attestationObject: corrupt, keyID: keyID, clientDataHash: hash, at: Date())
        #expect(OpenSSLErrorQueue.isEmpty)
        _ = try? ECPublicKey(x962: [0x04] + [UInt8](repeating: 7, count: 64))
        #expect(OpenSSLErrorQueue.isEmpty)
        _ = try? ECPublicKey(
            pem: "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n")
        #expect(OpenSSLErrorQueue.isEmpty)
        _ = try? AttestationVerifier(
            appIDs: ["A.b"], environment: .any,
            additionalTrustRootsPEM: ["-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"])
        #expect(OpenSSLErrorQueue.isEmpty)
        let key = try ECPublicKey(x962: try VectorFixtures.base64(vector.expected.public_key_x962))
        for signature: [UInt8] in [
            [0x30], [0x30, 0x06, 0x02, 0x01, 0x00, 0x02, 0x01, 0x00],
            [0x30, 0x45] + [UInt8](repeating: 0xff, count: 69),
        ] {
            #expect(!key.isValidSignature(signature, for: [1, 2, 3]))
            #expect(OpenSSLErrorQueue.isEmpty)
        }
    }
}
