private import COpenSSL
import Foundation

/// Errors of the simulator (development tooling: one struct with a message is enough).
public struct SimulatorError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { "simulator: \(self.message)" }

    /// An OpenSSL failure, with the drained error queue.
    static func openSSL(_ operation: String) -> SimulatorError {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            messages.append(String(decoding: bytes, as: UTF8.self))
        }
        return SimulatorError("\(operation) failed" + (messages.isEmpty ? "" : ": " + messages.joined(separator: "; ")))
    }
}

/// An owned EC `EVP_PKEY *` (private key): P-256 for devices and signers, P-384 for the CAs
/// (as Apple's roots and App Attest intermediate are). Immutable after init; OpenSSL keys may be
/// used for signing from several threads at once (each signature gets its own `EVP_MD_CTX`).
final class SimulatorKey: @unchecked Sendable {
    enum Curve: String {
        case p256 = "P-256"
        case p384 = "P-384"

        /// OpenSSL's group name.
        var groupName: String { self == .p256 ? "prime256v1" : "secp384r1" }
    }

    let pointer: OpaquePointer
    let curve: Curve

    private init(pointer: OpaquePointer, curve: Curve) {
        self.pointer = pointer
        self.curve = curve
    }

    deinit { EVP_PKEY_free(self.pointer) }

    static func generate(_ curve: Curve = .p256) throws(SimulatorError) -> SimulatorKey {
        guard let key = COpenSSL_EVP_EC_gen(curve.rawValue) else { throw .openSSL("EVP_EC_gen(\(curve.rawValue))") }
        return SimulatorKey(pointer: key, curve: curve)
    }

    /// A PKCS#8 or SEC1 PEM private key on one of `curves`.
    convenience init(pem: String, curves: Set<Curve> = [.p256]) throws(SimulatorError) {
        let parsed: OpaquePointer? = Array(pem.utf8).withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let parsed else { throw .openSSL("PEM_read_bio_PrivateKey") }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        let group =
            EVP_PKEY_get_group_name(parsed, &name, name.count, &length) == 1
            ? String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        guard let curve = curves.first(where: { $0.groupName == group }) else {
            EVP_PKEY_free(parsed)
            ERR_clear_error()
            throw SimulatorError(
                "private key is not an EC key on \(curves.map(\.rawValue).sorted().joined(separator: " or "))")
        }
        self.init(pointer: parsed, curve: curve)
    }

    /// PKCS#8 PEM, unencrypted (development keys).
    var privateKeyPEM: String {
        get throws(SimulatorError) {
            try withMemoryBIO { bio in PEM_write_bio_PrivateKey(bio, self.pointer, nil, nil, 0, nil, nil) == 1 }
        }
    }

    /// The public key as an X9.62 uncompressed point (65 bytes).
    var x962: [UInt8] {
        get throws(SimulatorError) {
            var raw: UnsafeMutablePointer<UInt8>?
            let count = EVP_PKEY_get1_encoded_public_key(self.pointer, &raw)
            guard count == 65, let raw else {
                if let raw { COpenSSL_free(raw) }
                throw .openSSL("EVP_PKEY_get1_encoded_public_key")
            }
            defer { COpenSSL_free(raw) }
            return Array(UnsafeBufferPointer(start: raw, count: count))
        }
    }

    /// DER ECDSA signature with SHA-256 over `message` (the digest signed is SHA256(message)).
    func sign(_ message: [UInt8]) throws(SimulatorError) -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { throw .openSSL("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, self.pointer) == 1 else {
            throw .openSSL("EVP_DigestSignInit")
        }
        var length = 0
        guard message.withUnsafeBufferPointer({ EVP_DigestSign(ctx, nil, &length, $0.baseAddress, $0.count) }) == 1
        else { throw .openSSL("EVP_DigestSign (size)") }
        var signature = [UInt8](repeating: 0, count: length)
        let ok = signature.withUnsafeMutableBufferPointer { out in
            message.withUnsafeBufferPointer { EVP_DigestSign(ctx, out.baseAddress, &length, $0.baseAddress, $0.count) }
        }
        guard ok == 1 else { throw .openSSL("EVP_DigestSign") }
        return Array(signature.prefix(length))
    }
}

/// An owned `X509 *`.
final class SimulatorCertificate: @unchecked Sendable {
    let pointer: OpaquePointer

    private init(pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit { X509_free(self.pointer) }

    convenience init(pem: String) throws(SimulatorError) {
        let parsed: OpaquePointer? = Array(pem.utf8).withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_X509(bio, nil, nil, nil)
        }
        guard let parsed else { throw .openSSL("PEM_read_bio_X509") }
        self.init(pointer: parsed)
    }

    var der: [UInt8] {
        get throws(SimulatorError) {
            var raw: UnsafeMutablePointer<UInt8>?
            let count = i2d_X509(self.pointer, &raw)
            guard count > 0, let raw else { throw .openSSL("i2d_X509") }
            defer { COpenSSL_free(raw) }
            return Array(UnsafeBufferPointer(start: raw, count: Int(count)))
        }
    }

    var pem: String {
        get throws(SimulatorError) {
            try withMemoryBIO { bio in PEM_write_bio_X509(bio, self.pointer) == 1 }
        }
    }

    /// DER of the serial number INTEGER.
    var serialNumberDER: [UInt8] {
        get throws(SimulatorError) {
            var raw: UnsafeMutablePointer<UInt8>?
            let count = i2d_ASN1_INTEGER(X509_get_serialNumber(self.pointer), &raw)
            guard count > 0, let raw else { throw .openSSL("i2d_ASN1_INTEGER") }
            defer { COpenSSL_free(raw) }
            return Array(UnsafeBufferPointer(start: raw, count: Int(count)))
        }
    }

    /// What a certificate the simulator issues looks like.
    struct Template {
        var commonName: String
        var organization: String = "attest-gateway simulator"
        var notBefore: Date
        var notAfter: Date
        var isCA: Bool
        /// OpenSSL `keyUsage` config text.
        var keyUsage: String
        /// `pathlen` of a CA's basic constraints (nil: none).
        var pathLength: Int? = nil
        /// Subject and authority key identifiers (Apple's credential certificates have none).
        var keyIdentifiers: Bool = true
        /// Digest of the issuer's signature (Apple: SHA-384 from its P-384 roots, SHA-256 below).
        var signatureDigestIsSHA384: Bool = false
        /// Extra extensions: dotted OID → DER value (non-critical).
        var customExtensions: [(oid: String, value: [UInt8])] = []
    }

    /// Issues a certificate for `subjectKey`, signed by `issuerKey`; `issuer` nil = self-signed.
    static func issue(
        _ template: Template,
        subjectKey: SimulatorKey,
        issuer: SimulatorCertificate?,
        issuerKey: SimulatorKey
    ) throws(SimulatorError) -> SimulatorCertificate {
        guard let x509 = X509_new() else { throw .openSSL("X509_new") }
        let certificate = SimulatorCertificate(pointer: x509)
        guard X509_set_version(x509, 2) == 1 else { throw .openSSL("X509_set_version") }

        var serial = [UInt8](repeating: 0, count: 16)
        guard RAND_bytes(&serial, Int32(serial.count)) == 1 else { throw .openSSL("RAND_bytes") }
        serial[0] &= 0x7f
        serial[0] |= 0x01  // positive, 16 bytes
        guard let bn = BN_bin2bn(serial, Int32(serial.count), nil) else { throw .openSSL("BN_bin2bn") }
        defer { BN_free(bn) }
        guard BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x509)) != nil else { throw .openSSL("BN_to_ASN1_INTEGER") }

        guard ASN1_TIME_set(X509_getm_notBefore(x509), time_t(template.notBefore.timeIntervalSince1970)) != nil,
            ASN1_TIME_set(X509_getm_notAfter(x509), time_t(template.notAfter.timeIntervalSince1970)) != nil
        else { throw .openSSL("ASN1_TIME_set") }

        guard let name = X509_NAME_new() else { throw .openSSL("X509_NAME_new") }
        defer { X509_NAME_free(name) }
        for (field, value) in [("CN", template.commonName), ("O", template.organization)] {
            let bytes = Array(value.utf8)
            guard X509_NAME_add_entry_by_txt(name, field, V_ASN1_UTF8STRING, bytes, Int32(bytes.count), -1, 0) == 1
            else { throw .openSSL("X509_NAME_add_entry_by_txt") }
        }
        guard X509_set_subject_name(x509, name) == 1 else { throw .openSSL("X509_set_subject_name") }
        let issuerName = issuer.map { X509_get_subject_name($0.pointer) } ?? name
        guard X509_set_issuer_name(x509, issuerName) == 1 else { throw .openSSL("X509_set_issuer_name") }
        guard X509_set_pubkey(x509, subjectKey.pointer) == 1 else { throw .openSSL("X509_set_pubkey") }

        var ctx = X509V3_CTX()
        X509V3_set_ctx(&ctx, issuer?.pointer ?? x509, x509, nil, nil, 0)
        let basic =
            template.isCA
            ? "critical,CA:TRUE" + (template.pathLength.map { ",pathlen:\($0)" } ?? "") : "critical,CA:FALSE"
        var extensions: [(Int32, String)] = [
            (NID_basic_constraints, basic),
            (NID_key_usage, "critical," + template.keyUsage),
        ]
        if template.keyIdentifiers {
            extensions.append((NID_subject_key_identifier, "hash"))
            if issuer != nil { extensions.append((NID_authority_key_identifier, "keyid:always")) }
        }
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_nconf_nid(nil, &ctx, nid, value) else {
                throw .openSSL("X509V3_EXT_nconf_nid(\(nid), \(value))")
            }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x509, ext, -1) == 1 else { throw .openSSL("X509_add_ext") }
        }
        for custom in template.customExtensions {
            try certificate.addExtension(oid: custom.oid, value: custom.value)
        }
        let digest = template.signatureDigestIsSHA384 ? EVP_sha384() : EVP_sha256()
        guard X509_sign(x509, issuerKey.pointer, digest) > 0 else { throw .openSSL("X509_sign") }
        return certificate
    }

    private func addExtension(oid: String, value: [UInt8]) throws(SimulatorError) {
        guard let object = OBJ_txt2obj(oid, 1) else { throw .openSSL("OBJ_txt2obj(\(oid))") }
        defer { ASN1_OBJECT_free(object) }
        guard let octets = ASN1_OCTET_STRING_new() else { throw .openSSL("ASN1_OCTET_STRING_new") }
        defer { ASN1_OCTET_STRING_free(octets) }
        guard ASN1_OCTET_STRING_set(octets, value, Int32(value.count)) == 1 else {
            throw .openSSL("ASN1_OCTET_STRING_set")
        }
        guard let ext = X509_EXTENSION_create_by_OBJ(nil, object, 0, octets) else {
            throw .openSSL("X509_EXTENSION_create_by_OBJ")
        }
        defer { X509_EXTENSION_free(ext) }
        guard X509_add_ext(self.pointer, ext, -1) == 1 else { throw .openSSL("X509_add_ext") }
    }
}

/// Runs `write` against a memory BIO and returns what it wrote, as text.
private func withMemoryBIO(_ write: (OpaquePointer) -> Bool) throws(SimulatorError) -> String {
    guard let bio = BIO_new(BIO_s_mem()) else { throw .openSSL("BIO_new") }
    defer { BIO_free(bio) }
    guard write(bio) else { throw .openSSL("PEM write") }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = chunk.withUnsafeMutableBytes { BIO_read(bio, $0.baseAddress, Int32($0.count)) }
        if count <= 0 { break }
        out += chunk[0..<Int(count)]
    }
    return String(decoding: out, as: UTF8.self)
}
