private import COpenSSL
import Foundation

/// Owns one OpenSSL `X509`.
///
/// Sendable: immutable after `init`; OpenSSL guards the X509's lazily cached extension data
/// with the object's own lock, so a verified intermediate can be shared by the trust
/// store's cache (`CertificateTrustStore`).
final class ParsedCertificate: @unchecked Sendable {
    let pointer: OpaquePointer  // X509 *

    /// Parses exactly `der` (trailing bytes are rejected).
    /// - Parameter label: names the certificate in error messages, e.g. "x5c[0]".
    init(der: [UInt8], label: String) throws(VerificationError) {
        guard !der.isEmpty else {
            throw VerificationError(.malformedCertificate, "\(label) is empty")
        }
        var consumed = 0
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let certificate = d2i_X509(nil, &cursor, buffer.count)
            if let cursor, let base = buffer.baseAddress { consumed = cursor - base }
            return certificate
        }
        guard let parsed else {
            let detail = OpenSSLErrorQueue.drain()
            throw VerificationError(.malformedCertificate, "\(label) is not a DER X.509 certificate (\(detail))")
        }
        guard consumed == der.count else {
            X509_free(parsed)
            throw VerificationError(
                .malformedCertificate, "\(label) has \(der.count - consumed) trailing byte(s) after the certificate")
        }
        self.pointer = parsed
    }

    /// Takes ownership of an `X509 *`.
    private init(owning pointer: OpaquePointer) {
        self.pointer = pointer
    }

    /// Every certificate of a PEM text (at least one), in order.
    static func all(pem: String, label: String) throws(VerificationError) -> [ParsedCertificate] {
        let bytes = Array(pem.utf8)
        guard bytes.count < 1 << 20 else {
            throw VerificationError(.malformedCertificate, "\(label) PEM of \(bytes.count) bytes is too large")
        }
        var certificates: [ParsedCertificate] = []
        bytes.withUnsafeBufferPointer { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return }
            defer { BIO_free(bio) }
            while certificates.count < 64, let certificate = PEM_read_bio_X509(bio, nil, nil, nil) {
                certificates.append(ParsedCertificate(owning: certificate))
            }
        }
        // Reading stops with "no start line" at the end of the text: expected, not an error.
        let detail = OpenSSLErrorQueue.drain()
        guard !certificates.isEmpty else {
            throw VerificationError(.malformedCertificate, "\(label) holds no PEM certificate (\(detail))")
        }
        return certificates
    }

    deinit {
        X509_free(self.pointer)
    }

    /// notAfter, or nil if OpenSSL cannot read the field.
    var notAfter: Date? {
        Self.notAfter(of: self.pointer)
    }

    /// notBefore...notAfter of an `X509 *`, or nil if a field cannot be read.
    static func validity(of x509: OpaquePointer) -> ClosedRange<Date>? {
        guard let start = Self.date(X509_get0_notBefore(x509)), let end = Self.notAfter(of: x509), start <= end else {
            return nil
        }
        return start...end
    }

    private static func notAfter(of x509: OpaquePointer) -> Date? {
        Self.date(X509_get0_notAfter(x509))
    }

    private static func date(_ time: UnsafePointer<ASN1_TIME>?) -> Date? {
        guard let time else { return nil }
        var broken = tm()
        guard ASN1_TIME_to_tm(time, &broken) == 1 else {
            OpenSSLErrorQueue.clear()
            return nil
        }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&broken)))
    }

    /// The contents (extnValue) of the single extension with `oid`; nil when absent.
    /// Throws when the extension occurs more than once.
    func extensionValue(_ oid: OpenSSLObjectIdentifier, label: String) throws(VerificationError) -> [UInt8]? {
        let index = X509_get_ext_by_OBJ(self.pointer, oid.pointer, -1)
        guard index >= 0 else { return nil }
        guard X509_get_ext_by_OBJ(self.pointer, oid.pointer, index) < 0 else {
            throw VerificationError(.malformedCertificate, "\(label) carries extension \(oid.dotted) more than once")
        }
        guard let ext = X509_get_ext(self.pointer, index), let data = X509_EXTENSION_get_data(ext) else { return nil }
        return Self.bytes(of: UnsafePointer(data))
    }

    /// The subjectPublicKey BIT STRING contents when the key is an EC key on P-256:
    /// the X9.62 point as the certificate carries it.
    func p256PublicKeyPoint(label: String) throws(VerificationError) -> [UInt8] {
        guard let pkey = X509_get0_pubkey(self.pointer) else {
            let detail = OpenSSLErrorQueue.drain()
            throw VerificationError(.malformedCertificate, "\(label) public key cannot be read (\(detail))")
        }
        guard EVP_PKEY_is_a(pkey, "EC") == 1 else {
            throw VerificationError(.invalidPublicKey, "\(label) public key is not an EC key")
        }
        var nameBuffer = [CChar](repeating: 0, count: 64)
        var nameLength = 0
        guard EVP_PKEY_get_group_name(pkey, &nameBuffer, nameBuffer.count, &nameLength) == 1 else {
            OpenSSLErrorQueue.clear()
            throw VerificationError(.invalidPublicKey, "\(label) EC key has no named curve")
        }
        let name = String(decoding: nameBuffer.prefix(nameLength).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard name == "prime256v1" else {
            throw VerificationError(.invalidPublicKey, "\(label) key is on curve \(name), not P-256")
        }
        guard let bits = X509_get0_pubkey_bitstr(self.pointer) else {
            throw VerificationError(.malformedCertificate, "\(label) has no subjectPublicKey")
        }
        let point = Self.bytes(of: UnsafePointer(bits))
        guard point.count == 65, point[0] == 0x04 else {
            throw VerificationError(
                .invalidPublicKey, "\(label) key is a \(point.count)-byte point, not a 65-byte uncompressed P-256 point"
            )
        }
        return point
    }

    private static func bytes(of string: UnsafePointer<ASN1_STRING>) -> [UInt8] {
        let length = Int(ASN1_STRING_length(string))
        guard length > 0, let data = ASN1_STRING_get0_data(string) else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: length))
    }
}
