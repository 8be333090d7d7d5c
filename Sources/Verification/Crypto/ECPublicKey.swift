private import COpenSSL

/// A P-256 public key, parsed and validated once, reused on the hot path.
///
/// Sendable because it is immutable after `init`: `isValidSignature` gives every call its
/// own `EVP_PKEY_CTX`, duplicated from a template initialised for verification once.
/// `EVP_PKEY_CTX_dup` only reads the template and bumps reference counts atomically, so
/// one key serves many threads; duplicating skips the provider fetch that
/// `EVP_PKEY_CTX_new` + `EVP_PKEY_verify_init` pay on every call in OpenSSL 3
/// (measured about 6% of a P-256 verify).
public final class ECPublicKey: @unchecked Sendable {
    /// The X9.62 uncompressed point (0x04 | X | Y), 65 bytes.
    public let x962: [UInt8]
    private let key: OpaquePointer  // EVP_PKEY *
    /// An `EVP_PKEY_CTX` initialised for verification, never used directly: each call
    /// duplicates it (skipping OpenSSL 3's per-context algorithm fetch) and frees the copy.
    private let verifyTemplate: OpaquePointer  // EVP_PKEY_CTX *

    /// - Parameter x962: a 65-byte uncompressed P-256 point; it must lie on the curve.
    public init(x962: [UInt8]) throws(VerificationError) {
        guard x962.count == 65, x962[0] == 0x04 else {
            throw VerificationError(
                .invalidPublicKey,
                "public key is \(x962.count) bytes starting 0x\(x962.prefix(1).hexString), not a 65-byte uncompressed point (0x04…)"
            )
        }
        let made = x962.withUnsafeBufferPointer {
            COpenSSL_EC_public_key_from_point("prime256v1", $0.baseAddress, $0.count)
        }
        guard let made else {
            let detail = OpenSSLErrorQueue.drain()
            throw VerificationError(.invalidPublicKey, "public key is not a point on P-256 (\(detail))")
        }
        // fromdata already rejects points off the curve; the explicit check also covers
        // the point at infinity and documents the requirement.
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, made, nil) else {
            EVP_PKEY_free(made)
            throw OpenSSLErrorQueue.internalError("EVP_PKEY_CTX_new_from_pkey")
        }
        guard EVP_PKEY_public_check(ctx) == 1 else {
            EVP_PKEY_CTX_free(ctx)
            EVP_PKEY_free(made)
            let detail = OpenSSLErrorQueue.drain()
            throw VerificationError(.invalidPublicKey, "public key fails the P-256 public key check (\(detail))")
        }
        guard EVP_PKEY_verify_init(ctx) == 1 else {
            EVP_PKEY_CTX_free(ctx)
            EVP_PKEY_free(made)
            throw OpenSSLErrorQueue.internalError("EVP_PKEY_verify_init")
        }
        self.verifyTemplate = ctx
        self.key = made
        self.x962 = x962
    }

    /// - Parameter pem: a `-----BEGIN PUBLIC KEY-----` (SubjectPublicKeyInfo) P-256 key.
    public convenience init(pem: String) throws(VerificationError) {
        let point = try Self.point(fromPEM: pem)
        try self.init(x962: point)
    }

    deinit {
        EVP_PKEY_CTX_free(self.verifyTemplate)
        EVP_PKEY_free(self.key)
    }

    /// ECDSA P-256 with SHA-256 over `message`: the digest checked is SHA256(message).
    /// `derSignature` is the DER `ECDSA-Sig-Value`. Any failure (bad DER, wrong key,
    /// wrong message) is `false`; the OpenSSL error queue is left empty.
    public func isValidSignature(_ derSignature: [UInt8], for message: [UInt8]) -> Bool {
        let digest = SHA256.hash(message)
        return self.isValidSignature(derSignature, forDigest: digest)
    }

    /// The same check over an already computed SHA-256 digest (32 bytes).
    func isValidSignature(_ derSignature: [UInt8], forDigest digest: [UInt8]) -> Bool {
        guard !derSignature.isEmpty, digest.count == SHA256.byteCount else { return false }
        // EVP_PKEY_CTX_dup only reads the template (and bumps reference counts atomically).
        guard let ctx = EVP_PKEY_CTX_dup(self.verifyTemplate) else {
            OpenSSLErrorQueue.clear()
            return false
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        let result = derSignature.withUnsafeBufferPointer { signature in
            digest.withUnsafeBufferPointer { digest in
                EVP_PKEY_verify(ctx, signature.baseAddress, signature.count, digest.baseAddress, digest.count)
            }
        }
        if result != 1 {
            OpenSSLErrorQueue.clear()
            return false
        }
        return true
    }

    private static func point(fromPEM pem: String) throws(VerificationError) -> [UInt8] {
        let bytes = Array(pem.utf8)
        guard bytes.count < 64 * 1024 else {
            throw VerificationError(.invalidPublicKey, "PEM public key of \(bytes.count) bytes is too large")
        }
        let parsed: OpaquePointer? = bytes.withUnsafeBufferPointer { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PUBKEY(bio, nil, nil, nil)
        }
        guard let pkey = parsed else {
            let detail = OpenSSLErrorQueue.drain()
            throw VerificationError(.invalidPublicKey, "not a PEM SubjectPublicKeyInfo public key (\(detail))")
        }
        defer { EVP_PKEY_free(pkey) }
        guard EVP_PKEY_is_a(pkey, "EC") == 1 else {
            OpenSSLErrorQueue.clear()
            throw VerificationError(.invalidPublicKey, "PEM public key is not an EC key")
        }
        var nameBuffer = [CChar](repeating: 0, count: 64)
        var nameLength = 0
        guard EVP_PKEY_get_group_name(pkey, &nameBuffer, nameBuffer.count, &nameLength) == 1 else {
            let detail = OpenSSLErrorQueue.drain()
            throw VerificationError(.invalidPublicKey, "PEM EC key has no named curve (\(detail))")
        }
        let name = String(decoding: nameBuffer.prefix(nameLength).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard name == "prime256v1" || name == "P-256" else {
            throw VerificationError(.invalidPublicKey, "PEM EC key is on curve \(name), not P-256")
        }
        var pointer: UnsafeMutablePointer<UInt8>?
        let length = EVP_PKEY_get1_encoded_public_key(pkey, &pointer)
        guard length > 0, let pointer else {
            throw OpenSSLErrorQueue.internalError("EVP_PKEY_get1_encoded_public_key")
        }
        defer { COpenSSL_free(pointer) }
        return Array(UnsafeBufferPointer(start: pointer, count: length))
    }
}
