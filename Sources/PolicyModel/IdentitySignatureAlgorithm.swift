/// `identity_signature.algorithm`, and `alg=` in the header.
public enum IdentitySignatureAlgorithm: String, Sendable, Hashable, CaseIterable {
    /// HMAC-SHA256 with a shared secret: the upstream holds the same key.
    case hmacSHA256 = "hmac-sha256"
    /// ECDSA P-256 with SHA-256: the upstream holds only the public key.
    case es256
}
