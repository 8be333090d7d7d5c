import Foundation
import GatewayIO
package import PolicyModel
package import Verification

/// The gateway's attestation tokens under one policy (`tokens:`): issuing (the active key),
/// checking (every listed key), the subject hash, and the published JWKS and OpenID discovery
/// documents. docs/tokens.md describes the token for the services that verify it.
///
/// Loaded at build time (blocking file reads, never on a loop); immutable and shared by every
/// queue. A reload builds a new one, so a rotation is a policy change: list the new key, make it
/// `active_kid`, and keep the old one listed until the longest TTL has passed.
package struct AttestationTokens: Sendable {
    package let configuration: TokensConfiguration
    private let signer: TokenSigner
    private let verifier: TokenVerifier
    private let subjectSecret: [UInt8]
    /// `GET /.well-known/jwks.json`.
    package let keySetDocument: [UInt8]
    /// `GET /.well-known/openid-configuration`.
    package let discoveryDocument: [UInt8]

    package static let jwksPath = "/.well-known/jwks.json"
    package static let discoveryPath = "/.well-known/openid-configuration"
    /// The platform claim of tokens exchanged for an App Attest assertion.
    package static let platformIOS = "ios"
    /// The platform claim of tokens exchanged for a debug token: never a device's.
    package static let platformDebug = "debug"
    /// The platform claim of tokens from the DeviceCheck exchange: a genuine device, no attested
    /// app instance (the assurance of `X-App-Attest-Status: devicecheck`).
    package static let platformDeviceCheck = "ios-devicecheck"

    /// The subject name of a DeviceCheck exchange: the digest of the device token, which changes
    /// with every `DCDevice.generateToken()`, so such a `sub` names one exchange, not an install.
    package static func deviceCheckSubjectName(deviceToken: String) -> String {
        "devicecheck:" + Base64URL.encode(SHA256.hash(Array(deviceToken.utf8)))
    }

    init(configuration: TokensConfiguration, keys: [(kid: String, key: ECPrivateKey)], subjectSecret: [UInt8])
        throws(TokenError)
    {
        guard let active = keys.first(where: { $0.kid == configuration.activeKID }) else {
            throw TokenError(.unknownKey, "active_kid is not one of the loaded keys")
        }
        var publicKeys: [String: ECPublicKey] = [:]
        var published: [JSONWebKey] = []
        for (kid, key) in keys {
            do {
                publicKeys[kid] = try ECPublicKey(x962: key.publicKeyX962)
            } catch {
                throw TokenError(.internalCryptoError, "the public half of key \(kid) is invalid: \(error.reason)")
            }
            published.append(try JSONWebKey(kid: kid, x962: key.publicKeyX962))
        }
        self.configuration = configuration
        self.signer = TokenSigner(kid: active.kid, key: active.key)
        self.verifier = TokenVerifier(
            issuer: configuration.issuer, keys: publicKeys, clockSkewSeconds: Int64(configuration.clockSkewSeconds),
            maximumLifetimeSeconds: Int64(configuration.maximumTTLSeconds))
        self.subjectSecret = subjectSecret
        self.keySetDocument = JSONWebKey.keySet(published)
        self.discoveryDocument = Array(
            JSONText.object([
                ("issuer", JSONText.quote(configuration.issuer)),
                ("jwks_uri", JSONText.quote(configuration.issuer + Self.jwksPath)),
                ("id_token_signing_alg_values_supported", "[\"ES256\"]"),
                ("response_types_supported", "[\"id_token\"]"),
                ("subject_types_supported", "[\"pairwise\"]"),
                (
                    "claims_supported",
                    "[\"iss\",\"sub\",\"aud\",\"exp\",\"iat\",\"jti\",\"app_id\",\"platform\",\"environment\",\"risk_metric\","
                        + "\"validation_category\",\"bundle_version\",\"key_access_policy\"]"
                ),
            ]).utf8)
    }

    /// Reads every key file of `configuration` and the subject secret now.
    package static func load(_ configuration: TokensConfiguration) -> Result<
        AttestationTokens, IdentitySigningKey.Problem
    > {
        var keys: [(kid: String, key: ECPrivateKey)] = []
        for entry in configuration.keys {
            switch IdentitySigningKey.load(algorithm: .es256, path: entry.keyFile) {
            case .success(.es256(let key)): keys.append((entry.kid, key))
            case .success(.hmacSHA256): return .failure(.notP256PrivateKey(path: entry.keyFile, why: "not an EC key"))
            case .failure(let problem): return .failure(problem)
            }
        }
        let secret: [UInt8]
        switch IdentitySigningKey.load(algorithm: .hmacSHA256, path: configuration.subjectKeyFile) {
        case .success(.hmacSHA256(let bytes)): secret = bytes
        case .success(.es256): return .failure(.unreadable(path: configuration.subjectKeyFile, why: "is not a secret"))
        case .failure(let problem): return .failure(problem)
        }
        do {
            return .success(try AttestationTokens(configuration: configuration, keys: keys, subjectSecret: secret))
        } catch {
            return .failure(.signingFailed(error.reason))
        }
    }

    /// `sub`: HMAC-SHA256 under the policy's secret of `name` (the key ID as standard base64, or
    /// `debug:<token name>`), base64url. Stable per install, and useless without the secret.
    package func subject(for name: String) -> String {
        Base64URL.encode(HMACSHA256.authenticationCode(key: self.subjectSecret, message: Array(name.utf8)))
    }

    /// What a token is issued to.
    package struct Holder: Sendable, Hashable {
        package var subjectName: String
        package var appID: String
        package var platform: String
        package var environment: String
        package var riskMetric: Int?
        /// What the key reported of the build (names as in the identity headers), when it did.
        package var validationCategory: String?
        package var bundleVersion: String?
        package var keyAccessPolicy: String?

        package init(
            subjectName: String, appID: String, platform: String, environment: String, riskMetric: Int? = nil,
            validationCategory: String? = nil, bundleVersion: String? = nil, keyAccessPolicy: String? = nil
        ) {
            self.subjectName = subjectName
            self.appID = appID
            self.platform = platform
            self.environment = environment
            self.riskMetric = riskMetric
            self.validationCategory = validationCategory
            self.bundleVersion = bundleVersion
            self.keyAccessPolicy = keyAccessPolicy
        }
    }

    /// A token for `holder` and `audience` (one of the policy's), issued at `now`.
    package func issue(
        to holder: Holder, audience: TokensConfiguration.Audience, now: Int64
    ) throws(TokenError) -> (token: String, claims: TokenClaims) {
        var random = SystemRandomNumberGenerator()
        let tokenID = Base64URL.encode((0..<16).map { _ in UInt8.random(in: .min ... .max, using: &random) })
        let claims = TokenClaims(
            issuer: self.configuration.issuer, subject: self.subject(for: holder.subjectName),
            audience: [audience.name], issuedAt: now, expiresAt: now + Int64(audience.ttlSeconds),
            tokenID: tokenID, appID: holder.appID, platform: holder.platform, environment: holder.environment,
            riskMetric: holder.riskMetric, validationCategory: holder.validationCategory,
            bundleVersion: holder.bundleVersion, keyAccessPolicy: holder.keyAccessPolicy)
        return (try self.signer.sign(claims), claims)
    }

    /// The claims of `text` for `audience` at `now`, or why it is refused (no I/O).
    package func check(_ text: String, audience: String, now: Int64) -> Result<TokenClaims, TokenError> {
        do {
            return .success(try self.verifier.verify(text, audience: audience, now: now))
        } catch {
            return .failure(error)
        }
    }
}
