/// `tokens:`: the gateway issues short-lived ES256 attestation tokens (JWTs) that services it
/// does not front can verify with their own JWT library (docs/tokens.md).
///
/// ```yaml
/// tokens:
///   issuer: https://attest.example.com     # iss; the JWKS is at issuer + /.well-known/jwks.json
///   active_kid: "2026-11"                  # signs every new token
///   keys:                                  # all published in the JWKS and accepted on routes
///     - {kid: "2026-11", key_file: /run/secrets/token-2026-11.pem}
///     - {kid: "2026-05", key_file: /run/secrets/token-2026-05.pem}   # until its tokens expired
///   subject_key_file: /run/secrets/token-subject   # HMAC secret: sub = HMAC(secret, key ID)
///   audiences:
///     - {name: orders}                     # ttl 5m by default
///     - {name: payments, ttl: 2m}
///   allow_debug_tokens: false              # a debug token may be exchanged for a token
///   clock_skew: 30s                        # allowed between the issuing gateway and a checking one
/// ```
///
/// Every key file is read and checked at load (and reload); only paths are kept, never the
/// key material (the policy is printed by `check-config`).
public struct TokensConfiguration: Sendable, Hashable {
    public struct Key: Sendable, Hashable {
        /// `[A-Za-z0-9._-]{1,64}`.
        public var kid: String
        /// Resolved against the policy file's directory: an unencrypted PKCS#8 P-256 PEM.
        public var keyFile: String

        public init(kid: String, keyFile: String) {
            self.kid = kid
            self.keyFile = keyFile
        }
    }

    public struct Audience: Sendable, Hashable {
        public var name: String
        public var ttlSeconds: Int

        public init(name: String, ttlSeconds: Int = TokensConfiguration.defaultTTLSeconds) {
            self.name = name
            self.ttlSeconds = ttlSeconds
        }
    }

    /// Minutes by default: a token outlives the assertion it was exchanged for, so keep it short.
    public static let defaultTTLSeconds = 300
    /// Longest TTL accepted: an hour already gives a stolen token a long life.
    public static let maximumTTLSeconds = 3600
    public static let defaultClockSkewSeconds = 30

    public var issuer: String
    public var keys: [Key]
    public var activeKID: String
    public var subjectKeyFile: String
    public var audiences: [Audience]
    public var allowDebugTokens: Bool
    public var clockSkewSeconds: Int

    public init(
        issuer: String, keys: [Key], activeKID: String, subjectKeyFile: String, audiences: [Audience],
        allowDebugTokens: Bool = false, clockSkewSeconds: Int = TokensConfiguration.defaultClockSkewSeconds
    ) {
        self.issuer = issuer
        self.keys = keys
        self.activeKID = activeKID
        self.subjectKeyFile = subjectKeyFile
        self.audiences = audiences
        self.allowDebugTokens = allowDebugTokens
        self.clockSkewSeconds = clockSkewSeconds
    }

    /// The audience named `name`, if the policy lists it.
    public func audience(_ name: String) -> Audience? {
        self.audiences.first { $0.name == name }
    }

    /// The longest TTL of any audience: no token of this policy lives longer.
    public var maximumTTLSeconds: Int { self.audiences.map(\.ttlSeconds).max() ?? Self.defaultTTLSeconds }
}

/// `accept_token:` on a route: an `Authorization: Bearer` token for `audience` is accepted
/// instead of a per-request assertion; `limited_use: true` accepts each token (its `jti`) once.
public struct TokenAcceptance: Sendable, Hashable {
    public var audience: String
    public var limitedUse: Bool

    public init(audience: String, limitedUse: Bool = false) {
        self.audience = audience
        self.limitedUse = limitedUse
    }
}
