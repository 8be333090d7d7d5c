import Foundation
import GatewayIO
import Verification

/// Stateless, self-authenticating challenges: issuing one costs no shared state.
///
/// A challenge is base64url (no padding) of 41 bytes:
/// `version (1) | expires_at (8, Unix seconds, big-endian) | nonce (16, CSPRNG) | tag (16)`,
/// where `tag` is the first 16 bytes of HMAC-SHA256(key, version | expires_at | nonce) under a
/// key every gateway shares (`ChallengeKeyring`). A gateway checks the tag and the expiry with
/// no round trip; single use is enforced when a challenge is *redeemed* by a request that
/// otherwise verifies, by a short-lived "used" marker (`AttestStore.putChallenge`, `SET NX EX`)
/// that lives until the challenge would have expired anyway.
///
/// So an anonymous client can make the gateway compute HMACs, but never write to Redis: the
/// anonymous flood (1,200 pipelined challenge requests filling a `noeviction` Redis) has
/// nothing to fill. Redis holds one marker per *successful* redemption, for at most the TTL.
package struct ChallengeTokens: Sendable {
    package static let version: UInt8 = 1
    static let nonceBytes = 16
    static let tagBytes = 16
    static let byteCount = 1 + 8 + nonceBytes + tagBytes
    /// Accepted difference between gateways' clocks, in seconds (an expiry that far beyond
    /// `now + ttl` is still accepted; one beyond that was not minted with this TTL).
    static let clockSkewSeconds: Int64 = 30

    /// The first key signs; every key verifies (rotation: add the new key first, remove the
    /// old one after one TTL).
    package let keys: [[UInt8]]
    package let ttlSeconds: Int

    package init(keys: [[UInt8]], ttlSeconds: Int) {
        precondition(!keys.isEmpty, "a challenge keyring needs at least one key")
        self.keys = keys
        self.ttlSeconds = max(1, ttlSeconds)
    }

    /// Why a challenge was refused (the 401 `challenge_invalid` message says which).
    package enum Problem: String, Error, Sendable {
        case notBase64URL = "the challenge is not base64url"
        case wrongLength = "the challenge does not have the gateway's format"
        case unknownVersion = "the challenge format version is unknown"
        case badTag = "the challenge was not issued by this gateway fleet"
        case expired = "the challenge expired"
        case tooFarInFuture = "the challenge expires later than this gateway's TTL allows"
    }

    /// A checked challenge: still to be redeemed (once) within `remainingSeconds`.
    package struct Checked: Sendable, Equatable {
        package var text: String
        package var remainingSeconds: Int
    }

    /// A fresh challenge valid for `ttlSeconds` from `now` (Unix seconds).
    package func mint(now: Int64) -> String {
        var bytes: [UInt8] = [Self.version]
        let expires = UInt64(max(0, now + Int64(self.ttlSeconds)))
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: expires >> shift)) }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<(Self.nonceBytes / 8) {
            let word = generator.next()
            for j in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: word >> (8 * UInt64(j)))) }
        }
        bytes += HMACSHA256.authenticationCode(key: self.keys[0], message: bytes).prefix(Self.tagBytes)
        return Base64Text.encodeURL(bytes)
    }

    /// Checks format, tag and expiry (no I/O). Single use is the caller's redemption.
    package func check(_ text: String, now: Int64) -> Result<Checked, Problem> {
        guard text.utf8.count == (Self.byteCount * 8 + 5) / 6 else { return .failure(.wrongLength) }
        guard let bytes = Self.decodeBase64URL(text) else { return .failure(.notBase64URL) }
        guard bytes.count == Self.byteCount else { return .failure(.wrongLength) }
        guard bytes[0] == Self.version else { return .failure(.unknownVersion) }
        let signed = Array(bytes[0..<(Self.byteCount - Self.tagBytes)])
        let tag = bytes[(Self.byteCount - Self.tagBytes)...]
        let valid = self.keys.contains { key in
            HMACSHA256.constantTimeEquals(
                HMACSHA256.authenticationCode(key: key, message: signed).prefix(Self.tagBytes), tag)
        }
        guard valid else { return .failure(.badTag) }
        var expires: UInt64 = 0
        for byte in bytes[1...8] { expires = expires << 8 | UInt64(byte) }
        guard expires <= UInt64(Int64.max) else { return .failure(.tooFarInFuture) }
        let remaining = Int64(expires) - now
        guard remaining > 0 else { return .failure(.expired) }
        guard remaining <= Int64(self.ttlSeconds) + Self.clockSkewSeconds else { return .failure(.tooFarInFuture) }
        return .success(Checked(text: text, remainingSeconds: Int(remaining)))
    }

    /// base64url without padding; nil for any other alphabet or a bad length.
    static func decodeBase64URL(_ text: String) -> [UInt8]? {
        var standard = ""
        standard.reserveCapacity(text.utf8.count + 3)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "-": standard.append("+")
            case "_": standard.append("/")
            case "+", "/", "=": return nil
            default: standard.unicodeScalars.append(scalar)
            }
        }
        while standard.utf8.count % 4 != 0 { standard.append("=") }
        guard let data = Data(base64Encoded: standard) else { return nil }
        return Array(data)
    }
}
