private import COpenSSL
import Foundation

/// A P-256 private key loaded from an unencrypted PKCS#8 `PrivateKeyInfo`: the `.p8` file
/// Apple hands out for DeviceCheck / App Attest server keys (`-----BEGIN PRIVATE KEY-----`).
///
/// Only PKCS#8 is accepted, not SEC1 (`BEGIN EC PRIVATE KEY`) nor encrypted PKCS#8: Apple's
/// files are PKCS#8, and a different format usually means the wrong file was mounted.
/// Loading does no I/O (the caller reads the file), so this stays in the pure module.
///
/// Sendable because it is immutable after `init`: every signature gets its own `EVP_MD_CTX`,
/// and OpenSSL allows one `EVP_PKEY` to sign from several threads at once.
public final class ECPrivateKey: @unchecked Sendable {
    /// Largest key text accepted; a `.p8` is about 250 bytes.
    public static let maximumEncodedSize = 16 * 1024

    /// The public half as an X9.62 uncompressed point (65 bytes).
    public let publicKeyX962: [UInt8]
    private let key: OpaquePointer  // EVP_PKEY *

    /// - Parameter pem: the text of a `.p8` file: one `-----BEGIN PRIVATE KEY-----` block.
    public convenience init(pkcs8PEM pem: String) throws(VerificationError) {
        try self.init(pkcs8DER: try Self.derFromPEM(pem))
    }

    /// - Parameter der: a DER `PrivateKeyInfo` (RFC 5208) holding an EC P-256 key.
    public init(pkcs8DER der: [UInt8]) throws(VerificationError) {
        defer { ERR_clear_error() }
        guard !der.isEmpty, der.count <= Self.maximumEncodedSize else {
            throw VerificationError(.privateKeyNotPKCS8, "private key of \(der.count) bytes is not a PKCS#8 key")
        }
        let info: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PKCS8_PRIV_KEY_INFO(nil, &cursor, buffer.count)
        }
        guard let info else {
            throw VerificationError(.privateKeyNotPKCS8, "private key is not a DER PKCS#8 PrivateKeyInfo")
        }
        defer { PKCS8_PRIV_KEY_INFO_free(info) }
        guard let key = EVP_PKCS82PKEY(info) else {
            throw VerificationError(
                .privateKeyNotPKCS8, "PKCS#8 private key holds no key OpenSSL can load (\(OpenSSLErrorQueue.drain()))")
        }
        guard EVP_PKEY_is_a(key, "EC") == 1 else {
            EVP_PKEY_free(key)
            throw VerificationError(.privateKeyNotP256, "private key is not an EC key (Apple's .p8 keys are P-256)")
        }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        let group =
            EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1
            ? String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) : "unnamed"
        guard group == "prime256v1" || group == "P-256" else {
            EVP_PKEY_free(key)
            throw VerificationError(.privateKeyNotP256, "private key is on curve \(group), not P-256")
        }
        var raw: UnsafeMutablePointer<UInt8>?
        let count = EVP_PKEY_get1_encoded_public_key(key, &raw)
        guard count == 65, let raw else {
            if let raw { COpenSSL_free(raw) }
            EVP_PKEY_free(key)
            throw OpenSSLErrorQueue.internalError("EVP_PKEY_get1_encoded_public_key")
        }
        self.publicKeyX962 = Array(UnsafeBufferPointer(start: raw, count: count))
        COpenSSL_free(raw)
        self.key = key
    }

    deinit { EVP_PKEY_free(self.key) }

    /// ECDSA P-256 with SHA-256 over `message` (the digest signed is SHA256(message)), as the
    /// 64-byte `r ‖ s` that JOSE's ES256 wants (RFC 7518 §3.4), not DER.
    public func signatureRS(for message: [UInt8]) throws(VerificationError) -> [UInt8] {
        defer { ERR_clear_error() }
        guard let ctx = EVP_MD_CTX_new() else { throw OpenSSLErrorQueue.internalError("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, self.key) == 1 else {
            throw OpenSSLErrorQueue.internalError("EVP_DigestSignInit")
        }
        var length = 0
        guard message.withUnsafeBufferPointer({ EVP_DigestSign(ctx, nil, &length, $0.baseAddress, $0.count) }) == 1
        else { throw OpenSSLErrorQueue.internalError("EVP_DigestSign (size)") }
        var der = [UInt8](repeating: 0, count: length)
        let signed = der.withUnsafeMutableBufferPointer { out in
            message.withUnsafeBufferPointer { EVP_DigestSign(ctx, out.baseAddress, &length, $0.baseAddress, $0.count) }
        }
        guard signed == 1 else { throw OpenSSLErrorQueue.internalError("EVP_DigestSign") }
        guard let rs = ECDSASignatureEncoding.rs(fromDER: Array(der.prefix(length))) else {
            throw OpenSSLErrorQueue.internalError("d2i_ECDSA_SIG of our own signature")
        }
        return rs
    }

    /// The DER inside the one `PRIVATE KEY` PEM block of `pem`, or a typed refusal naming
    /// what was found instead.
    private static func derFromPEM(_ pem: String) throws(VerificationError) -> [UInt8] {
        guard pem.utf8.count <= Self.maximumEncodedSize else {
            throw VerificationError(.privateKeyNotPKCS8, "private key text of \(pem.utf8.count) bytes is too large")
        }
        let begin = "-----BEGIN PRIVATE KEY-----"
        let end = "-----END PRIVATE KEY-----"
        guard let start = pem.range(of: begin), let stop = pem.range(of: end, range: start.upperBound..<pem.endIndex)
        else {
            let found =
                pem.contains("BEGIN EC PRIVATE KEY")
                ? "a SEC1 EC key (convert it: openssl pkcs8 -topk8 -nocrypt)"
                : pem.contains("BEGIN ENCRYPTED PRIVATE KEY")
                    ? "an encrypted PKCS#8 key (Apple's .p8 files are not encrypted)"
                    : pem.contains("-----BEGIN ") ? "another PEM block" : "no PEM block"
            throw VerificationError(.privateKeyNotPKCS8, "expected a -----BEGIN PRIVATE KEY----- block; found \(found)")
        }
        let body = pem[start.upperBound..<stop.lowerBound].filter { !$0.isWhitespace }
        guard let data = Data(base64Encoded: String(body)) else {
            throw VerificationError(.privateKeyNotPKCS8, "the PRIVATE KEY block is not base64")
        }
        return [UInt8](data)
    }
}
