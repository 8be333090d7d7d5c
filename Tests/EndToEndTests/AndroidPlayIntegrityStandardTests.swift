import Foundation
import GatewayTesting
import Simulator
import Testing
import Verification

extension EndToEnd.Android {
    /// Standard Play Integrity tokens through the built binary, a real Redis and a fake Google
    /// over TLS (token endpoint checking the service account's RS256 assertion, and
    /// decodeIntegrityToken): a good verdict enrolls; a bad verdict, a wrong requestHash,
    /// Google failing until the breaker opens, and a spent daily budget are each refused with
    /// their own code; `reverify_after` expiry refuses a key's requests until a fresh token
    /// re-verifies it.
    @Test(.timeLimit(.minutes(4)))
    func playIntegrityStandardTokens() throws {
        let files = try TemporaryDirectory()
        defer { files.remove() }
        let google = try FakeGooglePlayIntegrity(in: files)
        defer { google.kill() }
        let settings =
            #"play_integrity: {mode: standard, service_account_file: "\#(google.serviceAccountFile)", api_url: "\#(google.apiURL)", ca_file: "\#(google.caFile)", reverify_after: 1h, max_retries: 1, timeout: 3s}"#
        let android = try AndroidWorld(appSettings: settings)
        defer { android.world.shutDown() }

        /// The verdict for `client`'s key bound to `bound` (the request hash of docs/protocol.md).
        func token(
            for client: AndroidReferenceClient, challenge bound: String,
            edit: (inout PlayIntegrityPayload) -> Void = { _ in }
        ) throws -> String {
            let spki = try #require(client.subjectPublicKeyInfo)
            var payload = PlayIntegrityMinter.goodPayload(
                packageName: Self.package, nonce: "", certificateDigest: AndroidAttestationOptions.defaultSigningDigest,
                timestampMillis: Int64(Date().timeIntervalSince1970 * 1000))
            payload.requestDetails = .init(
                requestPackageName: Self.package, timestampMillis: payload.requestDetails.timestampMillis, nonce: nil,
                requestHash: AndroidReferenceClient.playIntegrityNonce(challenge: bound, attestedKeySPKI: spki))
            edit(&payload)
            return FakeGooglePlayIntegrity.token(try PlayIntegrityMinter.json(payload))
        }

        func enroll(
            on world: AndroidWorld, boundTo other: String? = nil, edit: (inout PlayIntegrityPayload) -> Void = { _ in }
        ) throws -> (AndroidReferenceClient, HTTPResponse) {
            let challenge = try world.challenge()
            let key = try world.authority.generateKey(challenge: Array(challenge.utf8))
            let client = AndroidReferenceClient(key: key)
            let response = try world.gateway.request(
                "POST", "/app-attest/attest", headers: [("Content-Type", "application/json")],
                body: AndroidReferenceClient.enrollmentBody(
                    challenge: challenge, chain: key.chain,
                    playIntegrityToken: try token(for: client, challenge: other ?? challenge, edit: edit)))
            return (client, response)
        }

        // A good verdict: enrolled, "verified", and the key signs requests.
        let (client, enrolled) = try enroll(on: android)
        #expect(enrolled.status == 201, "\(enrolled)")
        #expect(try enrolled.json()["play_integrity"] as? String == "verified")
        #expect(try android.send(client, "GET", "/v1/items").status == 200)
        #expect((try google.stats()["token_grants"] as? Int) == 1)
        #expect((try google.stats()["assertions_refused"] as? Int) == 0)

        // A verdict the policy refuses, and one bound to another challenge.
        expectDenied(
            try enroll(on: android, edit: { $0.deviceIntegrity.deviceRecognitionVerdict = [.meetsBasicIntegrity] }).1,
            403, "play_integrity_device_integrity_insufficient")
        expectDenied(
            try enroll(on: android, boundTo: try android.challenge()).1, 401, "play_integrity_request_hash_mismatch")
        // A token Google cannot decode.
        let challenge = try android.challenge()
        let key = try android.authority.generateKey(challenge: Array(challenge.utf8))
        expectDenied(
            try android.gateway.request(
                "POST", "/app-attest/attest", headers: [("Content-Type", "application/json")],
                body: AndroidReferenceClient.enrollmentBody(
                    challenge: challenge, chain: key.chain, playIntegrityToken: "not-a-token")), 400,
            "play_integrity_bad_format")

        // reverify_after: a key whose stored verdict is older than 1 h is refused until it
        // presents a fresh token (its verdict time moved back in Redis: two hours pass).
        let (second, secondEnrolled) = try enroll(on: android)
        #expect(secondEnrolled.status == 201, "\(secondEnrolled)")
        let old = String(Int(Date().timeIntervalSince1970) - 7200)
        _ = try android.world.redis.command("HSET", "appattest:key:{\(second.keyID)}", "pi_verified_at", old)
        expectDenied(try android.send(second, "GET", "/v1/items"), 401, "play_integrity_reverify_required")
        let fresh = try android.challenge()
        let signer = try ECPrivateKey(pkcs8PEM: second.key.privateKeyPEM)
        let signature = try #require(ECDSASignatureEncoding.der(fromRS: try signer.signatureRS(for: Array(fresh.utf8))))
        let body: [String: Any] = [
            "platform": "android", "key_id": second.keyID, "challenge": fresh,
            "play_integrity_token": try token(for: second, challenge: fresh),
            "signature": Data(signature).base64EncodedString(),
        ]
        let reverified = try android.gateway.request(
            "POST", "/app-attest/attest", headers: [("Content-Type", "application/json")],
            body: [UInt8](try JSONSerialization.data(withJSONObject: body)))
        #expect(reverified.status == 200, "\(reverified)")
        #expect(try reverified.json()["play_integrity"] as? String == "verified")
        #expect(try android.send(second, "GET", "/v1/items").status == 200)
        // A re-verification signed by another key is refused.
        let stolen = try android.challenge()
        var forged = body
        forged["challenge"] = stolen
        forged["play_integrity_token"] = try token(for: second, challenge: stolen)
        expectDenied(
            try android.gateway.request(
                "POST", "/app-attest/attest", headers: [("Content-Type", "application/json")],
                body: [UInt8](try JSONSerialization.data(withJSONObject: forged))), 401,
            "android_request_signature_invalid")

        // Google failing: 500s, one retry each; five failures open the breaker, after which
        // nothing more reaches Google and enrollments are still refused with the same code.
        try google.setMode(#"{"status": 500}"#)
        for _ in 0..<3 {
            expectDenied(try enroll(on: android).1, 503, "play_integrity_unavailable")
        }
        let failedCalls = try google.decodeCalls(500)
        let stats = try google.stats()
        #expect(failedCalls == 5, "\(stats)")
        expectDenied(try enroll(on: android).1, 503, "play_integrity_unavailable")
        #expect(try google.decodeCalls(500) == failedCalls)

        // A spent daily budget: a gateway allowed one call a day.
        try google.setMode(#"{"status": null}"#)
        let budget = try AndroidWorld(
            appSettings: settings.replacingOccurrences(of: "timeout: 3s}", with: "timeout: 3s, quota_per_day: 1}"))
        defer { budget.world.shutDown() }
        #expect(try enroll(on: budget).1.status == 201)
        let before = try google.decodeCalls(200)
        expectDenied(try enroll(on: budget).1, 503, "play_integrity_quota_exhausted")
        #expect(try google.decodeCalls(200) == before)
    }
}
