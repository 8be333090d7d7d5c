private import COpenSSL
import Foundation

/// One certificate of an Android attestation chain, with the reads the chain verifier
/// needs: OpenSSL stays behind this type.
///
/// The chain is checked pair by pair rather than with `X509_verify_cert`: attestation chains
/// break RFC 5280 path rules on purpose (ATTEST_KEY certificates are self-issued end-entity
/// certificates that sign the leaf, a Pixel 2 XL batch certificate signs without CA flags)
/// and the root is an anchor matched by key, whose certificate may have expired.
final class AndroidChainCertificate: @unchecked Sendable {
    // Sendable: immutable after init (see ParsedCertificate).
    let certificate: ParsedCertificate
    let label: String
    let notBefore: Date
    let notAfter: Date
    /// The DER SubjectPublicKeyInfo.
    let subjectPublicKeyInfo: [UInt8]
    /// Lowercase hex without leading zeros, as the status list names certificates; "-" first
    /// for a negative serial (which no list entry can match).
    let serialHex: String

    convenience init(der: [UInt8], label: String) throws(AndroidAttestationError) {
        let certificate: ParsedCertificate
        do {
            certificate = try ParsedCertificate(der: der, label: label)
        } catch {
            throw AndroidAttestationError(.certificateMalformed, error.reason)
        }
        try self.init(certificate, label: label)
    }

    init(_ certificate: ParsedCertificate, label: String) throws(AndroidAttestationError) {
        self.certificate = certificate
        self.label = label
        let pointer = self.certificate.pointer
        guard let notBefore = Self.date(X509_get0_notBefore(pointer)),
            let notAfter = Self.date(X509_get0_notAfter(pointer))
        else {
            OpenSSLErrorQueue.clear()
            throw AndroidAttestationError(.certificateMalformed, "\(label) validity dates cannot be read")
        }
        self.notBefore = notBefore
        self.notAfter = notAfter
        guard let spki = Self.subjectPublicKeyInfo(of: pointer) else {
            OpenSSLErrorQueue.clear()
            throw AndroidAttestationError(.certificateMalformed, "\(label) SubjectPublicKeyInfo cannot be encoded")
        }
        self.subjectPublicKeyInfo = spki
        guard let serial = X509_get0_serialNumber(pointer) else {
            throw AndroidAttestationError(.certificateMalformed, "\(label) has no serial number")
        }
        let length = Int(ASN1_STRING_length(serial))
        var magnitude: [UInt8] = []
        if length > 0, let data = ASN1_STRING_get0_data(serial) {
            magnitude = Array(UnsafeBufferPointer(start: data, count: length))
        }
        let hex = String(magnitude.hexString.drop { $0 == "0" })
        let negative = ASN1_STRING_type(serial) == V_ASN1_NEG_INTEGER
        self.serialHex = (negative ? "-" : "") + (hex.isEmpty ? "0" : hex)
    }

    /// Whether `issuer`'s key verifies this certificate's signature (and the signature
    /// algorithm inside the TBSCertificate equals the outer one, which `X509_verify` checks).
    func isSigned(by issuer: AndroidChainCertificate) -> Bool {
        guard let key = X509_get0_pubkey(issuer.certificate.pointer) else {
            OpenSSLErrorQueue.clear()
            return false
        }
        let ok = withExtendedLifetime(issuer) { X509_verify(self.certificate.pointer, key) == 1 }
        OpenSSLErrorQueue.clear()
        return ok
    }

    /// Whether this certificate's issuer name equals `issuer`'s subject name (OpenSSL's
    /// canonical comparison: case and whitespace folded in string attributes, as RFC 5280
    /// 7.1 asks).
    func issuerNameMatches(subjectOf issuer: AndroidChainCertificate) -> Bool {
        guard let name = X509_get_issuer_name(self.certificate.pointer),
            let subject = X509_get_subject_name(issuer.certificate.pointer)
        else { return false }
        let result = withExtendedLifetime(issuer) { X509_NAME_cmp(name, subject) }
        OpenSSLErrorQueue.clear()
        return result == 0
    }

    /// The KeyDescription extension's value; nil when absent.
    func keyDescriptionValue(_ oid: OpenSSLObjectIdentifier) throws(AndroidAttestationError) -> [UInt8]? {
        do {
            return try self.certificate.extensionValue(oid, label: self.label)
        } catch {
            throw AndroidAttestationError(.keyDescriptionMalformed, error.reason)
        }
    }

    /// The key as an uncompressed X9.62 point when it is EC P-256; nil otherwise.
    var p256PublicKeyPoint: [UInt8]? {
        let point = try? self.certificate.p256PublicKeyPoint(label: self.label)
        OpenSSLErrorQueue.clear()
        return point
    }

    private static func subjectPublicKeyInfo(of x509: OpaquePointer) -> [UInt8]? {
        guard let key = X509_get_X509_PUBKEY(x509) else { return nil }
        let length = i2d_X509_PUBKEY(key, nil)
        guard length > 0, length < 1 << 20 else { return nil }
        var out = [UInt8](repeating: 0, count: Int(length))
        let written = out.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_X509_PUBKEY(key, &cursor)
        }
        return written == length ? out : nil
    }

    private static func date(_ time: UnsafePointer<ASN1_TIME>?) -> Date? {
        guard let time else { return nil }
        var broken = tm()
        guard ASN1_TIME_to_tm(time, &broken) == 1 else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&broken)))
    }
}
