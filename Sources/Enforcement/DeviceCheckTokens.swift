package import AppleClient
import Foundation
import GatewayIO
import Verification

/// The short-lived gateway token a device without App Attest gets from the DeviceCheck
/// exchange (`DeviceCheckExchangeEndpoint`) and sends as `X-App-Attest-Token` on routes with
/// `fallback: devicecheck`.
///
/// Stateless, like challenges: every gateway of a fleet checks a token with no round trip. A
/// token is base64url (no padding) of
/// `version (1) | kind (1) | kid (4) | environment (1) | expires_at (8, Unix seconds, BE) |
/// device_token_sha256 (32) | app_id_length (1) | app_id | tag (32)`,
/// where `tag` is HMAC-SHA256 over everything before it.
///
/// The HMAC keys are not a second keyring: they are derived from the challenge keyring's keys
/// (`challenge_key_file`, or the store-shared key), `HMAC(challenge_key, label)`, so a token
/// key never signs a challenge and the reverse. `kid` is the first 4 bytes of SHA-256 of the
/// derived key: the first challenge key signs, every listed key verifies, and rotating the
/// challenge key file rotates these keys with it.
package struct DeviceCheckTokens: Sendable {
    package static let version: UInt8 = 1
    /// The only kind minted today; a different kind byte is refused (a future token type can
    /// never be mistaken for this one).
    package static let kindDeviceCheck: UInt8 = 1
    static let kidBytes = 4
    static let digestBytes = 32
    static let tagBytes = 32
    static let fixedBytes = 1 + 1 + kidBytes + 1 + 8 + digestBytes + 1
    /// Largest token text accepted (an App ID is at most 255 bytes).
    package static let maximumTextBytes = ((fixedBytes + 255 + tagBytes) * 4 + 2) / 3
    /// A token whose expiry lies further ahead than `ttl` plus this was not minted under this
    /// TTL (or by a gateway whose clock is far ahead): refused.
    package static let clockSkewSeconds: Int64 = 30
    /// Domain separation from the challenge HMAC under the same key.
    static let derivationLabel = Array("attest-gateway devicecheck token v1".utf8)

    /// One verification key and its `kid`.
    struct Key: Sendable {
        var kid: [UInt8]
        var secret: [UInt8]
    }

    /// The derived keys; the first signs.
    let keys: [Key]
    package let ttlSeconds: Int

    /// - Parameter challengeKeys: the challenge keyring's keys (first signs).
    package init(challengeKeys: [[UInt8]], ttlSeconds: Int) {
        precondition(!challengeKeys.isEmpty, "a token keyring needs at least one key")
        self.keys = challengeKeys.map { key in
            let secret = HMACSHA256.authenticationCode(key: key, message: Self.derivationLabel)
            return Key(kid: Array(SHA256.hash(secret).prefix(Self.kidBytes)), secret: secret)
        }
        self.ttlSeconds = max(1, ttlSeconds)
    }

    /// What a token says.
    package struct Claims: Sendable, Hashable {
        package var appID: String
        package var environment: AppleEnvironment
        package var expiresAt: Int64
        /// SHA-256 of the DeviceCheck token the device exchanged (never the token itself).
        package var deviceTokenDigest: [UInt8]

        package init(appID: String, environment: AppleEnvironment, expiresAt: Int64, deviceTokenDigest: [UInt8]) {
            self.appID = appID
            self.environment = environment
            self.expiresAt = expiresAt
            self.deviceTokenDigest = deviceTokenDigest
        }
    }

    /// Why a token was refused; each maps to one `EnforcementError` code.
    package enum Problem: String, Error, Sendable, CaseIterable {
        case malformed = "the token is not a gateway DeviceCheck token"
        case unknownVersion = "the token format version is unknown"
        case wrongKind = "the token is not a DeviceCheck token"
        case unknownKey = "the token was signed by a key this gateway does not hold (kid)"
        case badTag = "the token was not issued by this gateway fleet"
        case expired = "the token expired; exchange a new DeviceCheck token"
        case tooFarInFuture = "the token expires later than this gateway's TTL allows"
        case wrongEnvironment = "the token was issued for another environment"
        case wrongAppID = "the token was issued for another App ID"

        package var error: EnforcementError {
            switch self {
            case .expired: EnforcementError(.deviceCheckTokenExpired, self.rawValue)
            case .wrongAppID: EnforcementError(.appIDMismatch, self.rawValue)
            case .wrongEnvironment: EnforcementError(.environmentMismatch, self.rawValue)
            default: EnforcementError(.deviceCheckTokenInvalid, self.rawValue)
            }
        }
    }

    /// A token for `claims` (its `expiresAt` as given), signed by the first key.
    package func mint(_ claims: Claims) -> String {
        precondition(claims.deviceTokenDigest.count == Self.digestBytes, "a SHA-256 digest")
        let appID = Array(claims.appID.utf8.prefix(255))
        var bytes: [UInt8] = [Self.version, Self.kindDeviceCheck]
        bytes += self.keys[0].kid
        bytes.append(claims.environment == .production ? 0 : 1)
        let expires = UInt64(max(0, claims.expiresAt))
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: expires >> shift)) }
        bytes += claims.deviceTokenDigest
        bytes.append(UInt8(appID.count))
        bytes += appID
        bytes += HMACSHA256.authenticationCode(key: self.keys[0].secret, message: bytes)
        return Base64Text.encodeURL(bytes)
    }

    /// A fresh token valid for `ttlSeconds` from `now`.
    package func mint(appID: String, environment: AppleEnvironment, deviceToken: String, now: Int64) -> String {
        self.mint(
            Claims(
                appID: appID, environment: environment, expiresAt: now + Int64(self.ttlSeconds),
                deviceTokenDigest: SHA256.hash(Array(deviceToken.utf8))))
    }

    /// Checks format, kid, tag (constant time), then expiry, environment and App ID (no I/O).
    /// `appIDs` are the policy's accepted App IDs; `environment` nil accepts either.
    package func check(
        _ text: String, appIDs: [String], environment: AppleEnvironment?, now: Int64
    ) -> Result<Claims, Problem> {
        // Canonical text only: a decoder that ignores the last character's unused bits would
        // otherwise accept several spellings of one token.
        guard text.utf8.count <= Self.maximumTextBytes, let bytes = ChallengeTokens.decodeBase64URL(text),
            Base64Text.encodeURL(bytes) == text
        else {
            return .failure(.malformed)
        }
        guard bytes.count >= Self.fixedBytes + Self.tagBytes else { return .failure(.malformed) }
        guard bytes[0] == Self.version else { return .failure(.unknownVersion) }
        let appIDLength = Int(bytes[Self.fixedBytes - 1])
        guard bytes.count == Self.fixedBytes + appIDLength + Self.tagBytes else { return .failure(.malformed) }
        let signed = Array(bytes[0..<(bytes.count - Self.tagBytes)])
        let tag = bytes[(bytes.count - Self.tagBytes)...]
        let kid = bytes[2..<(2 + Self.kidBytes)]
        guard let key = self.keys.first(where: { $0.kid.elementsEqual(kid) }) else { return .failure(.unknownKey) }
        guard HMACSHA256.constantTimeEquals(HMACSHA256.authenticationCode(key: key.secret, message: signed), tag)
        else { return .failure(.badTag) }
        // Authentic from here: the fields are the gateway's own.
        guard bytes[1] == Self.kindDeviceCheck else { return .failure(.wrongKind) }
        let claimedEnvironment: AppleEnvironment
        switch bytes[6] {
        case 0: claimedEnvironment = .production
        case 1: claimedEnvironment = .development
        default: return .failure(.malformed)
        }
        var expires: UInt64 = 0
        for byte in bytes[7..<15] { expires = expires << 8 | UInt64(byte) }
        guard expires <= UInt64(Int64.max) else { return .failure(.tooFarInFuture) }
        let remaining = Int64(expires) - now
        guard remaining > 0 else { return .failure(.expired) }
        guard remaining <= Int64(self.ttlSeconds) + Self.clockSkewSeconds else { return .failure(.tooFarInFuture) }
        if let environment, environment != claimedEnvironment { return .failure(.wrongEnvironment) }
        let digest = Array(bytes[15..<(15 + Self.digestBytes)])
        let appIDBytes = bytes[Self.fixedBytes..<(Self.fixedBytes + appIDLength)]
        let appID = String(decoding: appIDBytes, as: UTF8.self)
        guard appIDs.contains(appID) else { return .failure(.wrongAppID) }
        return .success(
            Claims(appID: appID, environment: claimedEnvironment, expiresAt: Int64(expires), deviceTokenDigest: digest))
    }
}
