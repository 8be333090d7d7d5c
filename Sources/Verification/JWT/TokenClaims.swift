import Foundation

/// The claims of a gateway attestation token (docs/tokens.md lists them for verifiers).
///
/// Registered claims (RFC 7519 §4.1) plus the gateway's: `app_id`, `platform`, `environment`,
/// `risk_metric` when Apple's fraud-risk metric was known, and what the key's assertion and
/// attestation reported of the build (`validation_category`, `bundle_version`,
/// `key_access_policy`) when they did, so that routes can hold tokens to their `app_validation`. `sub` is a keyed hash of the
/// device key ID, never the key ID: a service that receives the token learns a stable
/// per-install name it cannot link to the gateway's store.
public struct TokenClaims: Sendable, Hashable, Codable {
    public var issuer: String
    public var subject: String
    /// One or more; rendered as a string when there is one (what most verifiers expect).
    public var audience: [String]
    /// Unix seconds.
    public var issuedAt: Int64
    public var expiresAt: Int64
    public var notBefore: Int64?
    /// Unique per token: the key a limited-use route consumes.
    public var tokenID: String
    public var appID: String
    /// `ios` today (`android` once Android signed requests issue tokens).
    public var platform: String
    /// `production` or `development`.
    public var environment: String
    public var riskMetric: Int?
    /// The launch validation category by name (`app_store`, ...), iOS 27+.
    public var validationCategory: String?
    public var bundleVersion: String?
    /// `macos_full_security` or `other` (macOS 27+).
    public var keyAccessPolicy: String?

    public init(
        issuer: String, subject: String, audience: [String], issuedAt: Int64, expiresAt: Int64,
        notBefore: Int64? = nil, tokenID: String, appID: String, platform: String, environment: String,
        riskMetric: Int? = nil, validationCategory: String? = nil, bundleVersion: String? = nil,
        keyAccessPolicy: String? = nil
    ) {
        self.issuer = issuer
        self.subject = subject
        self.audience = audience
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.notBefore = notBefore
        self.tokenID = tokenID
        self.appID = appID
        self.platform = platform
        self.environment = environment
        self.riskMetric = riskMetric
        self.validationCategory = validationCategory
        self.bundleVersion = bundleVersion
        self.keyAccessPolicy = keyAccessPolicy
    }

    private enum CodingKeys: String, CodingKey {
        case issuer = "iss"
        case subject = "sub"
        case audience = "aud"
        case issuedAt = "iat"
        case expiresAt = "exp"
        case notBefore = "nbf"
        case tokenID = "jti"
        case appID = "app_id"
        case platform
        case environment
        case riskMetric = "risk_metric"
        case validationCategory = "validation_category"
        case bundleVersion = "bundle_version"
        case keyAccessPolicy = "key_access_policy"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.issuer = try container.decode(String.self, forKey: .issuer)
        self.subject = try container.decode(String.self, forKey: .subject)
        // RFC 7519 §4.1.3: a single string or an array of strings.
        if let single = try? container.decode(String.self, forKey: .audience) {
            self.audience = [single]
        } else {
            self.audience = try container.decode([String].self, forKey: .audience)
        }
        // Integers only: a fractional or out-of-range time is refused, not rounded.
        self.issuedAt = try container.decode(Int64.self, forKey: .issuedAt)
        self.expiresAt = try container.decode(Int64.self, forKey: .expiresAt)
        self.notBefore = try container.decodeIfPresent(Int64.self, forKey: .notBefore)
        self.tokenID = try container.decode(String.self, forKey: .tokenID)
        self.appID = try container.decode(String.self, forKey: .appID)
        self.platform = try container.decode(String.self, forKey: .platform)
        self.environment = try container.decode(String.self, forKey: .environment)
        self.riskMetric = try container.decodeIfPresent(Int.self, forKey: .riskMetric)
        self.validationCategory = try container.decodeIfPresent(String.self, forKey: .validationCategory)
        self.bundleVersion = try container.decodeIfPresent(String.self, forKey: .bundleVersion)
        self.keyAccessPolicy = try container.decodeIfPresent(String.self, forKey: .keyAccessPolicy)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.issuer, forKey: .issuer)
        try container.encode(self.subject, forKey: .subject)
        if self.audience.count == 1 {
            try container.encode(self.audience[0], forKey: .audience)
        } else {
            try container.encode(self.audience, forKey: .audience)
        }
        try container.encode(self.issuedAt, forKey: .issuedAt)
        try container.encode(self.expiresAt, forKey: .expiresAt)
        try container.encodeIfPresent(self.notBefore, forKey: .notBefore)
        try container.encode(self.tokenID, forKey: .tokenID)
        try container.encode(self.appID, forKey: .appID)
        try container.encode(self.platform, forKey: .platform)
        try container.encode(self.environment, forKey: .environment)
        try container.encodeIfPresent(self.riskMetric, forKey: .riskMetric)
        try container.encodeIfPresent(self.validationCategory, forKey: .validationCategory)
        try container.encodeIfPresent(self.bundleVersion, forKey: .bundleVersion)
        try container.encodeIfPresent(self.keyAccessPolicy, forKey: .keyAccessPolicy)
    }
}
