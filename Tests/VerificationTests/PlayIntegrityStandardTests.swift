import Foundation
import Simulator
import Testing

@testable import Verification

/// The pure parts of standard Play Integrity tokens: the service-account key file, the RS256
/// OAuth assertion, the token endpoint's answer and the access-token cache, Google's
/// decodeIntegrityToken answer held to the same checks as a classic verdict, and the URLs.
@Suite struct PlayIntegrityStandardTests {
    static func fixture(_ name: String) throws -> [UInt8] {
        let url = try #require(
            Bundle.module.url(forResource: "Fixtures/play-integrity-standard/\(name)", withExtension: nil))
        return [UInt8](try Data(contentsOf: url))
    }

    static func account() throws -> GoogleServiceAccount {
        try GoogleServiceAccount(json: try Self.fixture("service-account.json"))
    }

    static func object(_ json: [UInt8]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any])
    }

    static func replacing(_ key: String, with value: Any?) throws -> [UInt8] {
        var object = try Self.object(try Self.fixture("service-account.json"))
        object[key] = value
        return [UInt8](try JSONSerialization.data(withJSONObject: object))
    }

    // MARK: Service account

    @Test func readsGooglesKeyFile() throws {
        let account = try Self.account()
        #expect(account.clientEmail == "play-integrity@attest-gateway-test.iam.gserviceaccount.com")
        #expect(account.privateKeyID == "0123456789abcdef0123456789abcdef01234567")
        #expect(account.tokenURI == "https://oauth2.googleapis.com/token")
        let pem = String(decoding: try Self.fixture("public.pem"), as: UTF8.self)
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        #expect(account.publicKeySPKI == [UInt8](try #require(Data(base64Encoded: body))))
    }

    @Test func refusesWhatIsNotAServiceAccountKey() throws {
        let ecKey = try PlayIntegrityTestKeys.generate()
        let cases: [(String, [UInt8])] = [
            ("not JSON", Array("private_key".utf8)),
            ("empty", []),
            ("too large", [UInt8](repeating: 0x20, count: GoogleServiceAccount.maximumFileBytes + 1)),
            ("wrong type", try Self.replacing("type", with: "authorized_user")),
            ("no e-mail", try Self.replacing("client_email", with: nil)),
            ("no key", try Self.replacing("private_key", with: nil)),
            ("not PEM", try Self.replacing("private_key", with: "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC")),
            ("http token URI", try Self.replacing("token_uri", with: "http://oauth2.googleapis.com/token")),
            ("EC key", try Self.replacing("private_key", with: ecKey.signingKeyPEM)),
        ]
        for (name, json) in cases {
            #expect(throws: PlayIntegrityError(.serviceAccountInvalid, ""), "\(name)") {
                try GoogleServiceAccount(json: json)
            }
        }
    }

    // MARK: OAuth assertion

    @Test func assertionCarriesGooglesClaims() throws {
        let account = try Self.account()
        let jwt = try GoogleOAuthAssertion.make(account: account, issuedAt: 1_790_000_000)
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        let header = try Self.object(try #require(Base64URL.decode(Array(parts[0].utf8))))
        #expect(header["alg"] as? String == "RS256")
        #expect(header["typ"] as? String == "JWT")
        #expect(header["kid"] as? String == account.privateKeyID)
        let claims = try Self.object(try #require(Base64URL.decode(Array(parts[1].utf8))))
        #expect(claims["iss"] as? String == account.clientEmail)
        #expect(claims["scope"] as? String == "https://www.googleapis.com/auth/playintegrity")
        #expect(claims["aud"] as? String == "https://oauth2.googleapis.com/token")
        #expect((claims["iat"] as? NSNumber)?.int64Value == 1_790_000_000)
        #expect((claims["exp"] as? NSNumber)?.int64Value == 1_790_003_600)
        // RSASSA-PKCS1-v1_5 over a 2048-bit key: 256 bytes.
        #expect(try #require(Base64URL.decode(Array(parts[2].utf8))).count == 256)
        // PKCS#1 v1.5 is deterministic: the same input signs the same; another input does not.
        #expect(try GoogleOAuthAssertion.make(account: account, issuedAt: 1_790_000_000) == jwt)
        #expect(
            try GoogleOAuthAssertion.make(account: account, issuedAt: 1_790_000_001).split(separator: ".")[2]
                != parts[2])
    }

    @Test func formBodyIsTheJWTBearerGrant() {
        let body = String(decoding: GoogleOAuthAssertion.formBody(assertion: "a.b.c"), as: UTF8.self)
        #expect(body == "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=a.b.c")
    }

    // MARK: Token endpoint answer and cache

    @Test func readsTheTokenEndpointsAnswer() throws {
        let token = try GoogleAccessToken.decode(
            Array(#"{"access_token":"ya29.c.abc","expires_in":3599,"token_type":"Bearer"}"#.utf8))
        #expect(token == GoogleAccessToken(value: "ya29.c.abc", expiresIn: 3599))
        let bad = [
            #"{"expires_in":3599}"#, #"{"access_token":"x","expires_in":true}"#,
            #"{"access_token":"x","expires_in":0}"#, #"{"access_token":"x","expires_in":3599,"token_type":"MAC"}"#,
            #"{"access_token":"a b","expires_in":3599}"#, "[]", "",
        ]
        for text in bad {
            #expect(throws: PlayIntegrityError(.googleAnswerMalformed, ""), "\(text)") {
                try GoogleAccessToken.decode(Array(text.utf8))
            }
        }
    }

    @Test func tokenCacheFetchesOnceAndRenewsBeforeExpiry() {
        var cache = GoogleAccessTokenCache()
        #expect(cache.request(now: 1000) == .fetch)
        #expect(cache.request(now: 1000) == .wait)
        cache.fetched(GoogleAccessToken(value: "t1", expiresIn: 3600), now: 1000)
        #expect(cache.request(now: 1001) == .use("t1"))
        // 5 minutes before expiry it is renewed.
        #expect(cache.request(now: 1000 + 3600 - 301) == .use("t1"))
        #expect(cache.request(now: 1000 + 3600 - 300) == .fetch)
        cache.failed()
        #expect(cache.request(now: 4400) == .fetch)
        cache.fetched(GoogleAccessToken(value: "t2", expiresIn: 60), now: 4400)
        // A short-lived token is renewed at half its life.
        #expect(cache.request(now: 4429) == .use("t2"))
        #expect(cache.request(now: 4430) == .fetch)
        cache.fetched(GoogleAccessToken(value: "t3", expiresIn: 3600), now: 4430)
        // A 401 with an older token leaves the new one; with the current one, drops it.
        cache.rejected("t2")
        #expect(cache.request(now: 4431) == .use("t3"))
        cache.rejected("t3")
        #expect(cache.request(now: 4431) == .fetch)
    }

    // MARK: decodeIntegrityToken

    static let digest = [UInt8](repeating: 7, count: 32)
    static let policy = PlayIntegrityPolicy(packageName: "com.example.app", certificateDigests: [digest])
    static let verifier = PlayIntegrityVerifier(decryptionKeys: [], verificationKeys: [], policy: policy)

    static func answer(_ payload: PlayIntegrityPayload) throws -> [UInt8] {
        Array(#"{"tokenPayloadExternal":"#.utf8) + (try PlayIntegrityMinter.json(payload)) + Array("}".utf8)
    }

    static func standardPayload(requestHash: String?, now: Int64) -> PlayIntegrityPayload {
        var payload = PlayIntegrityMinter.goodPayload(
            packageName: "com.example.app", nonce: "", certificateDigest: Self.digest, timestampMillis: now)
        payload.requestDetails = .init(
            requestPackageName: "com.example.app", timestampMillis: now, nonce: nil, requestHash: requestHash)
        return payload
    }

    @Test func googlesVerdictGoesThroughTheClassicChecks() throws {
        let now: Int64 = 1_790_000_000_000
        let challenge = Array("challenge-1".utf8)
        let spki = [UInt8](repeating: 1, count: 91)
        let hash = PlayIntegrityBinding.standardRequestHash(challenge: challenge, attestedKeySPKI: spki)
        #expect(hash == PlayIntegrityBinding.classicNonce(challenge: challenge, attestedKeySPKI: spki))
        let binding = PlayIntegrityBinding.standardEnrollment(challenge: challenge, attestedKeySPKI: spki)

        let payload = try PlayIntegrityStandardAnswer.payload(
            try Self.answer(Self.standardPayload(requestHash: hash, now: now)))
        let verdict = try Self.verifier.verifyStandard(payload: payload, binding: binding, nowMillis: now)
        #expect(verdict.isStandard)
        #expect(verdict.decryptionKeyName == PlayIntegrityVerdict.googleDecoder)
        #expect(verdict.strongestDeviceLabel == .meetsDeviceIntegrity)

        let other = PlayIntegrityBinding.standardRequestHash(
            challenge: Array("challenge-2".utf8), attestedKeySPKI: spki)
        #expect(throws: PlayIntegrityError(.requestHashMismatch, "")) {
            try Self.verifier.verifyStandard(
                payload: try PlayIntegrityStandardAnswer.payload(
                    try Self.answer(Self.standardPayload(requestHash: other, now: now))),
                binding: binding, nowMillis: now)
        }
        #expect(throws: PlayIntegrityError(.requestHashMismatch, "")) {
            try Self.verifier.verifyStandard(
                payload: try PlayIntegrityStandardAnswer.payload(
                    try Self.answer(Self.standardPayload(requestHash: nil, now: now))),
                binding: binding, nowMillis: now)
        }
        var weak = Self.standardPayload(requestHash: hash, now: now)
        weak.deviceIntegrity.deviceRecognitionVerdict = [.meetsBasicIntegrity]
        #expect(throws: PlayIntegrityError(.deviceIntegrityInsufficient, "")) {
            try Self.verifier.verifyStandard(
                payload: try PlayIntegrityStandardAnswer.payload(try Self.answer(weak)), binding: binding,
                nowMillis: now)
        }
        #expect(throws: PlayIntegrityError(.stale, "")) {
            try Self.verifier.verifyStandard(payload: payload, binding: binding, nowMillis: now + 301_000)
        }
    }

    @Test func refusesAnswersThatAreNotGooglesJSON() {
        #expect(throws: PlayIntegrityError(.googleAnswerMalformed, "")) {
            try PlayIntegrityStandardAnswer.payload(Array("not json".utf8))
        }
        #expect(throws: PlayIntegrityError(.payloadMalformed, "")) {
            try PlayIntegrityStandardAnswer.payload(Array(#"{"error":{"code":400}}"#.utf8))
        }
        #expect(throws: PlayIntegrityError(.payloadMalformed, "")) {
            try PlayIntegrityStandardAnswer.payload(Array(#"{"tokenPayloadExternal":{"requestDetails":1}}"#.utf8))
        }
    }

    @Test func requestBodyAndPath() throws {
        let body = try Self.object(PlayIntegrityStandardAnswer.requestBody(token: "abc.def"))
        #expect(body["integrity_token"] as? String == "abc.def")
        #expect(
            PlayIntegrityStandardAnswer.path(packageName: "com.example.app")
                == "/v1/com.example.app:decodeIntegrityToken")
    }

    // MARK: Endpoints

    @Test func parsesHTTPSEndpoints() {
        #expect(
            GoogleEndpoint(parsing: "https://oauth2.googleapis.com/token")
                == GoogleEndpoint(host: "oauth2.googleapis.com", port: 443, path: "/token"))
        #expect(
            GoogleEndpoint(parsing: "https://127.0.0.1:8443/")
                == GoogleEndpoint(host: "127.0.0.1", port: 8443, path: ""))
        #expect(GoogleEndpoint(parsing: "https://[::1]:9000/t") == GoogleEndpoint(host: "::1", port: 9000, path: "/t"))
        #expect(GoogleEndpoint(parsing: "https://[::1]:9000/t")?.authority == "[::1]:9000")
        for bad in [
            "http://x/token", "https://", "https://u@x/", "https://x/?q", "https://x:0/", "https://x:99999/",
            "https://x y/",
        ] {
            #expect(GoogleEndpoint(parsing: bad) == nil, "\(bad)")
        }
    }
}
