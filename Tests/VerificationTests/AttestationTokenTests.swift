import Foundation
import Simulator
import Testing

@testable import Verification

/// The token codec: strict decoding, ES256 sign and verify, and every refusal a verifier owes
/// an attacker who reads this code (forged algorithm, foreign key, stale or foreign claims).
@Suite struct AttestationTokenTests {
    static let issuer = "https://gateway.example.com"
    static let now: Int64 = 1_800_000_000

    static func newKey() throws -> ECPrivateKey {
        try ECPrivateKey(pkcs8PEM: try SimulatedDevice.generate().privateKeyPEM)
    }

    static func claims(
        audience: [String] = ["orders"], issuedAt: Int64 = now, ttl: Int64 = 600, notBefore: Int64? = nil
    ) -> TokenClaims {
        TokenClaims(
            issuer: Self.issuer, subject: "c3ViamVjdA", audience: audience, issuedAt: issuedAt,
            expiresAt: issuedAt + ttl, notBefore: notBefore, tokenID: "jti-1", appID: "ABCDE12345.com.example.app",
            platform: "ios", environment: "production", riskMetric: 3, validationCategory: "app_store",
            bundleVersion: "5.2")
    }

    struct Fixture {
        let signer: TokenSigner
        let verifier: TokenVerifier

        init(maximumLifetime: Int64? = nil) throws {
            let key = try AttestationTokenTests.newKey()
            self.signer = TokenSigner(kid: "k1", key: key)
            self.verifier = TokenVerifier(
                issuer: AttestationTokenTests.issuer, keys: ["k1": try ECPublicKey(x962: key.publicKeyX962)],
                clockSkewSeconds: 30, maximumLifetimeSeconds: maximumLifetime)
        }
    }

    /// The code of the `TokenError` `body` throws; nil when it throws nothing (or another error).
    static func code(_ body: () throws -> Void) -> TokenError.Code? {
        do {
            try body()
            return nil
        } catch {
            return (error as? TokenError)?.code
        }
    }

    @Test func aSignedTokenVerifiesAndKeepsEveryClaim() throws {
        let fixture = try Fixture()
        let claims = Self.claims(audience: ["orders", "profile"])
        let token = try fixture.signer.sign(claims)
        #expect(try fixture.verifier.verify(token, audience: "profile", now: Self.now + 10) == claims)
        let decoded = try CompactJWS(token)
        #expect(decoded.header == JOSEHeader(alg: "ES256", kid: "k1", typ: "JWT"))
        #expect(decoded.signature.count == 64)
        // One audience is written as a string, the form every verifier accepts.
        let single = try CompactJWS(try fixture.signer.sign(Self.claims()))
        #expect(String(decoding: single.payload, as: UTF8.self).contains(#""aud":"orders""#))
    }

    @Test func theSignatureIsJOSEsRawRSOverTheSigningInput() throws {
        let key = try Self.newKey()
        let token = try TokenSigner(kid: "k1", key: key).sign(Self.claims())
        let jws = try CompactJWS(token)
        let der = try #require(ECDSASignatureEncoding.der(fromRS: jws.signature))
        let publicKey = try ECPublicKey(x962: key.publicKeyX962)
        #expect(publicKey.isValidSignature(der, for: jws.signingInput))
        #expect(
            String(decoding: jws.signingInput, as: UTF8.self)
                == token.split(separator: ".")[0...1].joined(separator: "."))
    }

    @Test func algorithmsOtherThanES256AreRefusedBeforeAnyKeyIsUsed() throws {
        let fixture = try Fixture()
        for alg in ["none", "HS256", "RS256", "ES384", "es256", "ES256 "] {
            let token = try fixture.signer.sign(Self.claims(), header: JOSEHeader(alg: alg, kid: "k1"))
            #expect(
                Self.code { _ = try fixture.verifier.verify(token, audience: "orders", now: Self.now) }
                    == .algorithmRefused, "\(alg)")
        }
        // alg none with an empty signature part, as an attacker sends it.
        let parts = try fixture.signer.sign(Self.claims(), header: JOSEHeader(alg: "none", kid: "k1"))
            .split(separator: ".")
        let unsigned = parts[0] + "." + parts[1] + "."
        #expect(
            Self.code { _ = try fixture.verifier.verify(unsigned, audience: "orders", now: Self.now) }
                == .algorithmRefused)
    }

    @Test func anHS256TokenKeyedWithThePublicKeyIsRefused() throws {
        let fixture = try Fixture()
        let jwk = try JSONWebKey(kid: "k1", x962: fixture.signer.publicKeyX962)
        let header = Base64URL.encode(Array(#"{"alg":"HS256","kid":"k1","typ":"JWT"}"#.utf8))
        let payload = Base64URL.encode(Array(try JSONEncoder().encode(Self.claims())))
        // The classic confusion: HMAC keyed with the verifier's own public key (each spelling).
        for secret in [fixture.signer.publicKeyX962, Array(jwk.x.utf8), JSONWebKey.keySet([jwk])] {
            let mac = HMACSHA256.authenticationCode(key: secret, message: Array("\(header).\(payload)".utf8))
            let token = "\(header).\(payload).\(Base64URL.encode(mac))"
            #expect(
                Self.code { _ = try fixture.verifier.verify(token, audience: "orders", now: Self.now) }
                    == .algorithmRefused)
        }
    }

    @Test func kidChoosesAmongTheGatewaysKeysOnly() throws {
        let fixture = try Fixture()
        let other = TokenSigner(kid: "k1", key: try Self.newKey())
        // Same kid, another key (re-signed by an attacker's key): the signature fails.
        let resigned = try other.sign(Self.claims())
        #expect(
            Self.code { _ = try fixture.verifier.verify(resigned, audience: "orders", now: Self.now) }
                == .signatureInvalid)
        let unknown = try TokenSigner(kid: "k9", key: try Self.newKey()).sign(Self.claims())
        #expect(
            Self.code { _ = try fixture.verifier.verify(unknown, audience: "orders", now: Self.now) } == .unknownKey)
        let noKid = try fixture.signer.sign(Self.claims(), header: JOSEHeader(kid: nil))
        #expect(Self.code { _ = try fixture.verifier.verify(noKid, audience: "orders", now: Self.now) } == .unknownKey)
    }

    @Test func aChangedPayloadOrSignatureFailsTheSignature() throws {
        let fixture = try Fixture()
        let token = try fixture.signer.sign(Self.claims())
        let parts = token.split(separator: ".").map(String.init)
        let forged = Base64URL.encode(Array(try JSONEncoder().encode(Self.claims(audience: ["admin"]))))
        let swapped = parts[0] + "." + forged + "." + parts[2]
        #expect(
            Self.code { _ = try fixture.verifier.verify(swapped, audience: "admin", now: Self.now) }
                == .signatureInvalid)
        var signature = try #require(Base64URL.decode(Array(parts[2].utf8)))
        signature[10] ^= 0x01
        let flipped = parts[0] + "." + parts[1] + "." + Base64URL.encode(signature)
        #expect(
            Self.code { _ = try fixture.verifier.verify(flipped, audience: "orders", now: Self.now) }
                == .signatureInvalid)
        // A DER signature (what OpenSSL emits) is not JOSE's encoding.
        let raw = try #require(Base64URL.decode(Array(parts[2].utf8)))
        let der = try #require(ECDSASignatureEncoding.der(fromRS: raw))
        let derToken = parts[0] + "." + parts[1] + "." + Base64URL.encode(der)
        #expect(
            Self.code { _ = try fixture.verifier.verify(derToken, audience: "orders", now: Self.now) }
                == .signatureInvalid)
    }

    @Test func audienceAndIssuerAreComparedExactly() throws {
        let fixture = try Fixture()
        let token = try fixture.signer.sign(Self.claims(audience: ["orders"]))
        for wrong in ["Orders", "orders ", "order", ""] {
            #expect(
                Self.code { _ = try fixture.verifier.verify(token, audience: wrong, now: Self.now) }
                    == .audienceMismatch)
        }
        var foreign = Self.claims()
        foreign.issuer = Self.issuer + "/"
        let foreignToken = try fixture.signer.sign(foreign)
        #expect(
            Self.code { _ = try fixture.verifier.verify(foreignToken, audience: "orders", now: Self.now) }
                == .issuerMismatch)
    }

    @Test func timesAreCheckedWithBoundedSkew() throws {
        let fixture = try Fixture(maximumLifetime: 3600)
        let token = try fixture.signer.sign(Self.claims(ttl: 600))
        #expect(throws: Never.self) { try fixture.verifier.verify(token, audience: "orders", now: Self.now + 629) }
        #expect(
            Self.code { _ = try fixture.verifier.verify(token, audience: "orders", now: Self.now + 630) } == .expired)
        #expect(throws: Never.self) { try fixture.verifier.verify(token, audience: "orders", now: Self.now - 30) }
        #expect(
            Self.code { _ = try fixture.verifier.verify(token, audience: "orders", now: Self.now - 31) } == .notYetValid
        )
        let later = try fixture.signer.sign(Self.claims(notBefore: Self.now + 100))
        #expect(Self.code { _ = try fixture.verifier.verify(later, audience: "orders", now: Self.now) } == .notYetValid)
        let long = try fixture.signer.sign(Self.claims(ttl: 3601))
        #expect(
            Self.code { _ = try fixture.verifier.verify(long, audience: "orders", now: Self.now) } == .lifetimeTooLong)
        let overflow = try fixture.signer.sign(Self.claims(issuedAt: Int64.min + 5, ttl: 0))
        #expect(Self.code { _ = try fixture.verifier.verify(overflow, audience: "orders", now: Self.now) } == .expired)
        // The skew itself is bounded: a policy cannot turn expiry off.
        #expect(TokenVerifier(issuer: "x", keys: [:], clockSkewSeconds: 86_400).clockSkewSeconds == 300)
    }

    @Test(arguments: [
        "", ".", "..", "a.b", "a.b.c.d", "eyJhbGciOiJFUzI1NiJ9..sig", ".eyJ9.", "eyJhbGciOiJFUzI1NiJ9.e30=.AAAA",
        "eyJhbGciOiJFUzI1NiJ9.e30.AA AA", "eyJhbGciOiJFUzI1NiJ9.e30.A+/A", "eyJhbGciOiJFUzI1NiJ9.e30.A",
        "W10.e30.AAAA", "bnVsbA.e30.AAAA", "eyJhbGciOjF9.e30.AAAA", "IHsiYWxnIjoiRVMyNTYifQ.e30.AAAA",
    ])
    func malformedTokensAreRefusedAsMalformed(text: String) throws {
        let fixture = try Fixture()
        #expect(Self.code { _ = try fixture.verifier.verify(text, audience: "orders", now: Self.now) } == .malformed)
    }

    @Test func theSizeCapAndTheCanonicalBase64AreEnforced() throws {
        let fixture = try Fixture()
        let big = String(repeating: "A", count: CompactJWS.maximumBytes + 1)
        #expect(Self.code { _ = try CompactJWS(big) } == .malformed)
        // "e30" is "{}"; "e31" decodes to the same bytes with non-zero unused bits.
        #expect(Base64URL.decode(Array("e30".utf8)) == Array("{}".utf8))
        #expect(Base64URL.decode(Array("e31".utf8)) == nil)
        #expect(Base64URL.decode(Array("e30=".utf8)) == nil)
        // Claims of the wrong type are malformed once the signature holds.
        struct Loose: Encodable {
            var iss = AttestationTokenTests.issuer, sub = "s", aud = "orders", iat = 1.5, exp = "later", jti = "j"
        }
        let loose = try fixture.signer.sign(Loose(), header: JOSEHeader(kid: "k1"))
        #expect(Self.code { _ = try fixture.verifier.verify(loose, audience: "orders", now: Self.now) } == .malformed)
    }

    @Test func criticalHeaderExtensionsAreRefused() throws {
        let fixture = try Fixture()
        struct Critical: Encodable { var alg = "ES256", kid = "k1", crit = ["exp"] }
        let token = try fixture.signer.sign(Self.claims(), header: Critical())
        #expect(
            Self.code { _ = try fixture.verifier.verify(token, audience: "orders", now: Self.now) } == .algorithmRefused
        )
    }

    @Test func theJWKCarriesThePointsCoordinates() throws {
        let key = try Self.newKey()
        let jwk = try JSONWebKey(kid: "k1", x962: key.publicKeyX962)
        #expect(Base64URL.decode(Array(jwk.x.utf8)) == Array(key.publicKeyX962[1..<33]))
        #expect(Base64URL.decode(Array(jwk.y.utf8)) == Array(key.publicKeyX962[33...]))
        let set = String(decoding: JSONWebKey.keySet([jwk]), as: UTF8.self)
        #expect(set.hasPrefix(#"{"keys":[{"alg":"ES256","crv":"P-256","kid":"k1","kty":"EC","use":"sig","x":""#))
        #expect(Self.code { _ = try JSONWebKey(kid: "k", x962: [4, 1, 2]) } == .malformed)
    }
}
