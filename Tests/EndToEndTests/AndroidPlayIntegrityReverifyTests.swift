import Foundation
import GatewayTesting
import Simulator
import Testing
import Verification

extension EndToEnd.Android {
    /// `reverify_after` with classic tokens, through the built binary and a real Redis: a key
    /// whose stored verdict is older than the app's interval is refused, a re-verification with
    /// a fresh classic token (nonce over the new challenge and the enrolled key) and the key's
    /// signature restores it, and a replayed re-verification body is refused (one-use challenge).
    @Test(.timeLimit(.minutes(2)))
    func playIntegrityClassicReverification() throws {
        let keys = try PlayIntegrityTestKeys.generate()
        let minter = try PlayIntegrityMinter(keys: keys)
        let files = try TemporaryDirectory()
        defer { files.remove() }
        let decryption = files.path + "/play-decryption.b64"
        let verification = files.path + "/play-verification.b64"
        try (keys.decryptionKeyBase64 + "\n").write(toFile: decryption, atomically: true, encoding: .utf8)
        try (keys.verificationKeyBase64 + "\n").write(toFile: verification, atomically: true, encoding: .utf8)
        let android = try AndroidWorld(
            appSettings:
                #"play_integrity: {decryption_keys: [{name: k1, key_file: "\#(decryption)"}], verification_keys: [{name: v1, key_file: "\#(verification)"}], reverify_after: 30m}"#
        )
        defer { android.world.shutDown() }

        func token(_ client: AndroidReferenceClient, _ challenge: String) throws -> String {
            try minter.mint(
                PlayIntegrityMinter.goodPayload(
                    packageName: Self.package,
                    nonce: AndroidReferenceClient.playIntegrityNonce(
                        challenge: challenge, attestedKeySPKI: try #require(client.subjectPublicKeyInfo)),
                    certificateDigest: AndroidAttestationOptions.defaultSigningDigest,
                    timestampMillis: Int64(Date().timeIntervalSince1970 * 1000)))
        }

        let challenge = try android.challenge()
        let client = AndroidReferenceClient(key: try android.authority.generateKey(challenge: Array(challenge.utf8)))
        let enrolled = try android.gateway.request(
            "POST", "/app-attest/attest", headers: [("Content-Type", "application/json")],
            body: AndroidReferenceClient.enrollmentBody(
                challenge: challenge, chain: client.key.chain, playIntegrityToken: try token(client, challenge)))
        #expect(enrolled.status == 201, "\(enrolled)")
        #expect(try enrolled.json()["play_integrity"] as? String == "verified")

        // 31 minutes pass for the store: the verdict's time moves back (the store's time only
        // ever moves forward in production, so a cached copy is never fresher than the store;
        // the key has sent no request yet, so this gateway holds no copy of it).
        let old = String(Int(Date().timeIntervalSince1970) - 31 * 60)
        _ = try android.world.redis.command("HSET", "appattest:key:{\(client.keyID)}", "pi_verified_at", old)
        expectDenied(try android.send(client, "GET", "/v1/items"), 401, "play_integrity_reverify_required")

        let fresh = try android.challenge()
        let signer = try ECPrivateKey(pkcs8PEM: client.key.privateKeyPEM)
        let signature = try #require(ECDSASignatureEncoding.der(fromRS: try signer.signatureRS(for: Array(fresh.utf8))))
        let body = [UInt8](
            try JSONSerialization.data(withJSONObject: [
                "platform": "android", "key_id": client.keyID, "challenge": fresh,
                "play_integrity_token": try token(client, fresh), "signature": Data(signature).base64EncodedString(),
            ]))
        let reverified = try android.gateway.request(
            "POST", "/app-attest/attest", headers: [("Content-Type", "application/json")], body: body)
        #expect(reverified.status == 200, "\(reverified)")
        let verifiedAt = try #require(try reverified.json()["verified_at"] as? Int)
        #expect(abs(verifiedAt - Int(Date().timeIntervalSince1970)) < 60)
        // This gateway cached the key with its old verdict time at the refusal: that copy is
        // not trusted, the store's fresh time is, and the request passes.
        #expect(try android.send(client, "GET", "/v1/items").status == 200)
        // The same body again: its challenge is spent.
        expectDenied(
            try android.gateway.request(
                "POST", "/app-attest/attest", headers: [("Content-Type", "application/json")], body: body), 401,
            "challenge_invalid")
    }
}
