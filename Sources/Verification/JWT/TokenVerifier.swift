/// Checks an attestation token the gateway issued: the header, the ES256 signature under the
/// key its `kid` names, then issuer, audience and times. Pure: the caller passes the time.
///
/// Order matters to what a refusal tells: nothing in the payload is read before the signature
/// verifies, so a forged token is refused for its signature, never for a claim it chose.
/// `alg` must be `ES256` and every key is a P-256 key, so the header cannot pick another
/// algorithm (`none`, `HS256` keyed with the public key): the algorithm is the key's, and the
/// header must agree with it.
public struct TokenVerifier: Sendable {
    /// The clock difference allowed between the issuing gateway and this one.
    public static let defaultClockSkewSeconds: Int64 = 60

    public let issuer: String
    /// The keys that verify, by `kid`: the active one and the ones kept for the overlap window.
    public let keys: [String: ECPublicKey]
    public let clockSkewSeconds: Int64
    /// Longest `exp - iat` accepted (the policy's longest TTL); nil = unbounded.
    public let maximumLifetimeSeconds: Int64?

    public init(
        issuer: String, keys: [String: ECPublicKey], clockSkewSeconds: Int64 = TokenVerifier.defaultClockSkewSeconds,
        maximumLifetimeSeconds: Int64? = nil
    ) {
        self.issuer = issuer
        self.keys = keys
        self.clockSkewSeconds = max(0, min(clockSkewSeconds, 300))
        self.maximumLifetimeSeconds = maximumLifetimeSeconds
    }

    /// The claims of `text` when it is a valid token for `audience` at `now` (Unix seconds).
    public func verify(_ text: some StringProtocol, audience: String, now: Int64) throws(TokenError) -> TokenClaims {
        let token = try CompactJWS(text)
        return try self.verify(token, audience: audience, now: now)
    }

    public func verify(_ token: CompactJWS, audience: String, now: Int64) throws(TokenError) -> TokenClaims {
        guard token.header.alg == JOSEHeader.es256 else {
            throw TokenError(.algorithmRefused, "alg \(Self.printable(token.header.alg)) is refused; tokens are ES256")
        }
        if let typ = token.header.typ, typ != JOSEHeader.jwtType {
            throw TokenError(.malformed, "typ \(Self.printable(typ)) is not JWT")
        }
        guard let kid = token.header.kid, let key = self.keys[kid] else {
            throw TokenError(.unknownKey, "kid names none of this gateway's token keys")
        }
        guard token.signature.count == 2 * ECDSASignatureEncoding.scalarByteCount,
            let der = ECDSASignatureEncoding.der(fromRS: token.signature),
            key.isValidSignature(der, for: token.signingInput)
        else {
            throw TokenError(.signatureInvalid, "the ES256 signature does not verify under kid \(Self.printable(kid))")
        }
        // Authentic from here.
        let claims = try token.claims()
        guard claims.issuer == self.issuer else {
            throw TokenError(.issuerMismatch, "iss is not this gateway's issuer")
        }
        guard claims.audience.contains(audience) else {
            throw TokenError(.audienceMismatch, "aud does not name \(Self.printable(audience))")
        }
        guard now < claims.expiresAt.addingReportingOverflow(self.clockSkewSeconds).partialValue else {
            throw TokenError(.expired, "the token expired at \(claims.expiresAt)")
        }
        if let notBefore = claims.notBefore, notBefore > now + self.clockSkewSeconds {
            throw TokenError(.notYetValid, "nbf \(notBefore) is in the future")
        }
        guard claims.issuedAt <= now + self.clockSkewSeconds else {
            throw TokenError(.notYetValid, "iat \(claims.issuedAt) is in the future")
        }
        if let maximum = self.maximumLifetimeSeconds {
            let lifetime = claims.expiresAt.subtractingReportingOverflow(claims.issuedAt)
            guard !lifetime.overflow, lifetime.partialValue <= maximum else {
                throw TokenError(.lifetimeTooLong, "exp - iat exceeds the longest TTL issued (\(maximum) s)")
            }
        }
        return claims
    }

    /// At most 64 printable ASCII characters of attacker text, for a reason string.
    static func printable(_ text: String) -> String {
        String(
            text.unicodeScalars.prefix(64).map {
                $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F ? Character($0) : "?"
            })
    }
}
