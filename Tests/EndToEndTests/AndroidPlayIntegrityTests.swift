import Foundation
import GatewayTesting
import Simulator
import Testing
import Verification

extension EndToEnd.Android {
    /// An app whose policy entry has `play_integrity:`: enrollment through the built binary and
    /// a real Redis needs a classic Play Integrity token (minted under test keys whose Play
    /// Console files the policy names) bound to the challenge and the attested key.
    @Test(.timeLimit(.minutes(2)))
    func playIntegrityAtEnrollment() throws {
        let keys = try PlayIntegrityTestKeys.generate()
        let minter = try PlayIntegrityMinter(keys: keys)
        let files = try TemporaryDirectory()
        let decryption = files.path + "/play-decryption.b64"
        let verification = files.path + "/play-verification.b64"
        try (keys.decryptionKeyBase64 + "\n").write(toFile: decryption, atomically: true, encoding: .utf8)
        try (keys.verificationKeyBase64 + "\n").write(toFile: verification, atomically: true, encoding: .utf8)
        let android = try AndroidWorld(
            appSettings:
                #"play_integrity: {decryption_keys: [{name: k2026, key_file: "\#(decryption)"}], verification_keys: [{name: v1, key_file: "\#(verification)"}]}"#
        )
        defer { android.world.shutDown() }

        /// A key over a fresh challenge, and the verdict `edit` makes of a good one for it
        /// (nonce = base64url(SHA-256(challenge || SHA-256(spki))), written from the protocol page).
        func attempt(
            nonceChallenge: ((String) throws -> String)? = nil, mint: Bool = true,
            edit: (inout PlayIntegrityPayload) -> Void = { _ in }
        ) throws -> (AndroidReferenceClient, String?, HTTPResponse) {
            let challenge = try android.challenge()
            let key = try android.authority.generateKey(challenge: Array(challenge.utf8))
            let client = AndroidReferenceClient(key: key)
            var token: String?
            if mint {
                let spki = try #require(client.subjectPublicKeyInfo)
                let bound = try nonceChallenge?(challenge) ?? challenge
                var payload = PlayIntegrityMinter.goodPayload(
                    packageName: Self.package,
                    nonce: AndroidReferenceClient.playIntegrityNonce(challenge: bound, attestedKeySPKI: spki),
                    certificateDigest: AndroidAttestationOptions.defaultSigningDigest,
                    timestampMillis: Int64(Date().timeIntervalSince1970 * 1000))
                edit(&payload)
                token = try minter.mint(payload)
            }
            let response = try android.gateway.request(
                "POST", "/app-attest/attest", headers: [("Content-Type", "application/json")],
                body: AndroidReferenceClient.enrollmentBody(
                    challenge: challenge, chain: key.chain, playIntegrityToken: token))
            return (client, token, response)
        }

        // A good verdict: the key enrolls and signs requests.
        let (client, goodToken, enrolled) = try attempt()
        #expect(enrolled.status == 201, "\(enrolled)")
        #expect(try enrolled.json()["key_id"] as? String == client.keyID)
        #expect(!enrolled.bodyText.contains(try #require(goodToken)))
        let signed = try android.send(client, "GET", "/v1/items")
        #expect(signed.status == 200, "\(signed)")
        // The upstream learns the verdict (and a client's own copy never reaches it).
        let forwarded = try android.send(
            client, "GET", "/v1/items", headers: [("X-App-Attest-Play-Integrity", "forged")])
        #expect(forwarded.status == 200, "\(forwarded)")
        #expect(try UpstreamEcho(forwarded).values("x-app-attest-play-integrity") == ["verified"])

        // No token at all.
        expectDenied(try attempt(mint: false).2, 400, "play_integrity_token_missing")
        // A token minted for another challenge (the right key, another nonce).
        let (_, otherToken, other) = try attempt(nonceChallenge: { _ in try android.challenge() })
        expectDenied(other, 401, "play_integrity_nonce_mismatch")
        #expect(!other.bodyText.contains(try #require(otherToken)))
        // A verdict the policy refuses: basic integrity only (default: MEETS_DEVICE_INTEGRITY).
        expectDenied(
            try attempt(edit: { $0.deviceIntegrity.deviceRecognitionVerdict = [.meetsBasicIntegrity] }).2, 403,
            "play_integrity_device_integrity_insufficient")

        // One enrolled key; the refusals wrote nothing and are counted by their code.
        let metrics = try android.gateway.metrics()
        #expect(
            (metrics[#"attest_gateway_platform_verified_total{platform="android",kind="enrollment"}"#] ?? 0) == 1)
        // The access log never carries a token (the four enrollments' lines, once written).
        let attests = { android.gateway.accessLog.filter { ($0["path"] as? String) == "/app-attest/attest" } }
        #expect(eventually(timeout: .seconds(5)) { attests().count == 4 }, "\(android.gateway.accessLog)")
        let log = android.gateway.accessLog
        let tokens = [try #require(goodToken), try #require(otherToken)]
        for line in log {
            let text = String(decoding: try JSONSerialization.data(withJSONObject: line), as: UTF8.self)
            #expect(!tokens.contains(where: text.contains))
        }
    }
}
