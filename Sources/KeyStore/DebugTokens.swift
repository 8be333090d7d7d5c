package import Foundation
import GatewayIO
import PolicyModel
import Verification

/// Debug tokens: a stand-in for App Attest where it cannot run (the iOS Simulator, CI), like
/// Firebase App Check's debug provider. Operators create named tokens
/// (`attest-gateway debug-tokens create`); the app sends one in `X-App-Attest-Debug-Token`
/// instead of a key ID and assertion; routes with `allow_debug_tokens: true` accept it and
/// forward the request with `X-App-Attest-Status: debug`.
///
/// The token is shown once, at creation. The store keeps only SHA-256 of it (hex), with the
/// name, creation time, expiry and last use.
package enum DebugTokens {
    /// Token text: `agdt_` + base64url of 32 random bytes (so a leaked token is recognisable).
    package static let prefix = "agdt_"

    /// A fresh token from the system CSPRNG.
    package static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8](repeating: 0, count: 32)
        for i in stride(from: 0, to: 32, by: 8) {
            let word = generator.next()
            for j in 0..<8 { bytes[i + j] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(j))) }
        }
        return Self.prefix + Base64Text.encodeURL(bytes)
    }

    /// What the store keeps: lowercase hex of SHA-256 of the token's UTF-8.
    package static func digest(_ token: String) -> String {
        SHA256.hash(Array(token.utf8)).hexString
    }

    /// A plausible token (prefix, length, alphabet), checked before any store round trip.
    package static func isWellFormed(_ token: String) -> Bool {
        let utf8 = token.utf8
        guard utf8.count == Self.prefix.utf8.count + 43, token.hasPrefix(Self.prefix) else { return false }
        return utf8.dropFirst(Self.prefix.utf8.count).allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2D || byte == 0x5F
        }
    }

    /// Names: 1-64 of letters, digits, `_ - .` (they appear in logs and in Redis keys).
    package static func isValidName(_ name: String) -> Bool {
        PolicyValues.isName(name)
    }
}

/// One debug token as stored (never its secret).
package struct DebugTokenRecord: Sendable, Hashable {
    package var name: String
    package var createdAt: Date
    package var expiresAt: Date
    /// nil until first used.
    package var lastUsedAt: Date?

    package init(name: String, createdAt: Date, expiresAt: Date, lastUsedAt: Date? = nil) {
        self.name = name
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.lastUsedAt = lastUsedAt
    }

    package func isExpired(at now: Date) -> Bool { now >= self.expiresAt }
}

/// The outcome of presenting a debug token.
package enum DebugTokenUse: Sendable, Hashable {
    /// Valid: its name (last use recorded).
    case accepted(name: String)
    /// Known but past its expiry.
    case expired(name: String)
    /// Never created, or revoked.
    case unknown
}
