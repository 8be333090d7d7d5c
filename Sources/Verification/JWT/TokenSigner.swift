import Foundation

/// Signs attestation tokens: ES256 (ECDSA P-256 over SHA-256, the 64-byte `r ‖ s` of RFC 7518
/// §3.4) with one private key, header `{"alg":"ES256","kid":KID,"typ":"JWT"}`.
///
/// Sendable: the key is immutable and every signature gets its own OpenSSL context.
public struct TokenSigner: Sendable {
    public let kid: String
    private let key: ECPrivateKey

    public init(kid: String, key: ECPrivateKey) {
        self.kid = kid
        self.key = key
    }

    /// The public half (X9.62, 65 bytes), for the JWKS.
    public var publicKeyX962: [UInt8] { self.key.publicKeyX962 }

    /// The compact serialization of `claims`, signed now.
    public func sign(_ claims: TokenClaims) throws(TokenError) -> String {
        try self.sign(claims, header: JOSEHeader(kid: self.kid))
    }

    /// `claims` under any `header`: tests forge tokens with this (another `alg`, no `kid`), so
    /// that the verifier's refusals are tested on tokens signed by a real key.
    public func sign(_ claims: some Encodable, header: some Encodable) throws(TokenError) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let headerJSON: Data
        let claimsJSON: Data
        do {
            headerJSON = try encoder.encode(header)
            claimsJSON = try encoder.encode(claims)
        } catch {
            throw TokenError(.internalCryptoError, "the token could not be encoded as JSON")
        }
        let signingInput = Base64URL.encode([UInt8](headerJSON)) + "." + Base64URL.encode([UInt8](claimsJSON))
        let signature: [UInt8]
        do {
            signature = try self.key.signatureRS(for: Array(signingInput.utf8))
        } catch {
            throw TokenError(.internalCryptoError, "signing the token failed: \(error.reason)")
        }
        return signingInput + "." + Base64URL.encode(signature)
    }
}
