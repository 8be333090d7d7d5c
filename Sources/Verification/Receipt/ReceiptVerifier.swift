private import COpenSSL
public import Foundation
import Synchronization

/// Verifies App Attest receipts: the `attStmt.receipt` of an attestation and the refreshed
/// receipts Apple's fraud-metric endpoint returns.
///
/// A receipt is PKCS#7 signed data, in BER (indefinite lengths; the content is split into
/// 1000-byte OCTET STRING chunks that can cut a field in half), signed without signed
/// attributes by an "Application Attestation Fraud Receipt Signing" certificate that chains to
/// Apple Root CA - G3. Checks, in order, each with its own code:
/// 1. structure: bounded BER walk, one signed-data ContentInfo, no trailing bytes (`malformed_receipt`);
/// 2. the signature over the content by the one signer (`receipt_signature_invalid`);
/// 3. the payload fields (`malformed_receipt`, `receipt_field_missing`);
/// 4. the signer's chain to a trust root at the receipt's creation time, or at `time` when given,
///    and the signer carries Apple's receipt-signing marker extension (`receipt_chain_invalid`);
/// 5. App ID (`receipt_app_id_mismatch`) and attested public key (`receipt_public_key_mismatch`)
///    when the caller passes them.
///
/// Verification time: Apple's receipt-signing certificates live about a year, shorter than the
/// keys whose receipts they sign, so a receipt is checked at its own creation time (field 12),
/// as Apple's documentation says; `time` overrides it (the CLI's `--at`). The vector tests run
/// every receipt both ways: with no time and at the vector's `valid_at` (creation time, to the
/// second or + 1 minute), with the same outcome.
///
/// Thread-safe: the trust store is built once and only read; each call makes its own
/// `X509_STORE_CTX` and drains the OpenSSL error queue.
public struct ReceiptVerifier: Sendable {
    /// Largest receipt accepted (Apple's are about 4 KiB).
    public static let maximumReceiptSize = 64 * 1024

    /// Marker extension on Apple's receipt-signing certificates (and on the simulator's).
    /// Without this check any certificate under Apple Root CA - G3 (Apple Pay, Wallet, ...)
    /// could sign a receipt.
    public static let receiptSigningMarkerOID = "1.2.840.113635.100.12.15"

    private let trust: ReceiptTrustStore

    /// Apple Root CA - G3 embedded and pinned (Fixtures/apple_root_ca_g3.pem); extra roots only when passed.
    public init(additionalTrustRootsPEM: [String] = []) throws(VerificationError) {
        self.trust = try ReceiptTrustStore(rootsPEM: [AppleRootCAG3.pem] + additionalTrustRootsPEM)
    }

    /// Verifies at the receipt's own creation time unless `time` is given. When `appID` is given it
    /// must match field 2; when `publicKey` (X9.62 65 bytes) is given it must match the public key
    /// of the certificate in field 3.
    public func verify(receipt: [UInt8], appID: String?, publicKey: [UInt8]?, at time: Date?)
        throws(VerificationError) -> Receipt
    {
        defer { ERR_clear_error() }
        if let publicKey, publicKey.count != 65 || publicKey.first != 0x04 {
            throw VerificationError(
                .invalidPublicKey, "public key must be a 65-byte uncompressed X9.62 point, got \(publicKey.count) bytes"
            )
        }
        let envelope = try ReceiptEnvelope(receipt)
        let signed = try OpenSSLPKCS7(der: receipt)
        let payload = try signed.verifiedContent()
        let parsed = try Receipt(payload: payload)

        let verificationTime = time ?? parsed.creationTime
        try self.trust.verifyChain(
            signer: signed.signer, untrusted: signed, certificatesDigest: envelope.certificatesDigest,
            at: verificationTime)
        guard signed.signer.hasExtension(Self.receiptSigningMarkerOID) else {
            throw VerificationError(
                .receiptChainInvalid,
                "receipt signer lacks extension \(Self.receiptSigningMarkerOID): not a receipt-signing certificate")
        }

        if let appID, appID != parsed.appID {
            throw VerificationError(
                .receiptAppIDMismatch, "receipt App ID \"\(parsed.appID)\" is not the expected \"\(appID)\"")
        }
        let certificateKey = try Self.subjectPublicKeyBits(ofCertificate: parsed.attestedCertificate)
        if let publicKey {
            guard certificateKey == publicKey else {
                throw VerificationError(
                    .receiptPublicKeyMismatch,
                    "receipt certificate key \(certificateKey.prefix(8).hexString)… is not the attested key "
                        + "\(publicKey.prefix(8).hexString)…")
            }
        }
        return parsed
    }

    /// The subjectPublicKey BIT STRING content of a DER certificate (for EC keys, the X9.62
    /// point), read with the bounded DER reader: the certificate sits in the signed payload, so
    /// only its shape is checked here, not its signature.
    static func subjectPublicKeyBits(ofCertificate der: [UInt8]) throws(VerificationError) -> [UInt8] {
        let limits = ASN1Limits.der(errorCode: .malformedReceipt)
        let certificate = try ASN1Reader.parseSingle(der, limits: limits)
        guard certificate.identifier == .sequence else {
            throw VerificationError(.malformedReceipt, "receipt field 3 is not a DER X.509 certificate")
        }
        var outer = try certificate.childReader(limits: limits)
        let tbs = try outer.read(.sequence, "receipt certificate tbsCertificate")
        _ = try outer.read(.sequence, "receipt certificate signatureAlgorithm")
        _ = try outer.read(.bitString, "receipt certificate signature")
        try outer.expectEnd("receipt certificate")

        var fields = try tbs.childReader(limits: limits)
        var next = try fields.next()
        if let version = next, version.identifier == .contextSpecific(0) { next = try fields.next() }
        guard next?.identifier == .integer else {
            throw VerificationError(.malformedReceipt, "receipt certificate has no serial number")
        }
        _ = try fields.read(.sequence, "receipt certificate signature algorithm")
        _ = try fields.read(.sequence, "receipt certificate issuer")
        _ = try fields.read(.sequence, "receipt certificate validity")
        _ = try fields.read(.sequence, "receipt certificate subject")
        let spki = try fields.read(.sequence, "receipt certificate subjectPublicKeyInfo")
        var keyInfo = try spki.childReader(limits: limits)
        _ = try keyInfo.read(.sequence, "receipt certificate key algorithm")
        let bits = try keyInfo.read(.bitString, "receipt certificate subjectPublicKey")
        try keyInfo.expectEnd("receipt certificate subjectPublicKeyInfo")
        guard bits.content.first == 0 else {
            throw VerificationError(.malformedReceipt, "receipt certificate key is not a whole number of bytes")
        }
        return Array(bits.content.dropFirst())
    }
}

// MARK: - Structure (ASN1Reader, before any byte reaches OpenSSL)

/// The bounded BER walk of the PKCS#7 envelope: checks the shape OpenSSL is about to parse
/// (sizes, depth, one signed-data ContentInfo with attached content, at most 8 certificates,
/// one signer) before any byte reaches OpenSSL.
private struct ReceiptEnvelope {
    static let signedDataOID = "1.2.840.113549.1.7.2"
    static let dataOID = "1.2.840.113549.1.7.1"

    /// SHA-256 of the encoded certificates field (empty when there is none): part of the chain
    /// cache key, since the untrusted certificates steer chain building.
    var certificatesDigest: [UInt8] = []

    init(_ receipt: [UInt8]) throws(VerificationError) {
        guard receipt.count <= ReceiptVerifier.maximumReceiptSize else {
            throw VerificationError(
                .malformedReceipt,
                "receipt of \(receipt.count) bytes exceeds \(ReceiptVerifier.maximumReceiptSize)")
        }
        var limits = ASN1Limits.ber(errorCode: .malformedReceipt)
        limits.maximumDepth = 16
        let contentInfo = try ASN1Reader.parseSingle(receipt, limits: limits)
        guard contentInfo.identifier == .sequence else {
            throw VerificationError(.malformedReceipt, "receipt is \(contentInfo.identifier), expected a SEQUENCE")
        }
        var outer = try contentInfo.childReader(limits: limits)
        let type = try outer.read(.objectIdentifier, "receipt content type").objectIdentifier(limits: limits)
        guard type == Self.signedDataOID else {
            throw VerificationError(.malformedReceipt, "receipt content type \(type) is not PKCS#7 signed data")
        }
        let explicit = try outer.read(.contextSpecific(0), "receipt signed data")
        try outer.expectEnd("receipt ContentInfo")

        var explicitReader = try explicit.childReader(limits: limits)
        let signedData = try explicitReader.read(.sequence, "SignedData")
        try explicitReader.expectEnd("receipt [0]")

        var fields = try signedData.childReader(limits: limits)
        _ = try fields.read(.integer, "SignedData version").integerValue(limits: limits)
        _ = try fields.read(.set, "SignedData digestAlgorithms")
        let encapsulated = try fields.read(.sequence, "SignedData contentInfo")
        var content = try encapsulated.childReader(limits: limits)
        let contentType = try content.read(.objectIdentifier, "signed content type").objectIdentifier(limits: limits)
        guard contentType == Self.dataOID else {
            throw VerificationError(.malformedReceipt, "signed content type \(contentType) is not data")
        }
        guard let wrapped = try content.next(), wrapped.identifier == .contextSpecific(0) else {
            throw VerificationError(.malformedReceipt, "receipt has no signed content (detached signature)")
        }
        try content.expectEnd("signed contentInfo")
        var wrappedReader = try wrapped.childReader(limits: limits)
        guard let octets = try wrappedReader.next() else {
            throw VerificationError(.malformedReceipt, "receipt signed content is empty")
        }
        let payload = try octets.octetStringBytes(limits: limits)
        guard payload.count <= Receipt.maximumPayloadSize else {
            throw VerificationError(.malformedReceipt, "receipt payload of \(payload.count) bytes is too large")
        }
        try wrappedReader.expectEnd("signed content")

        var next = try fields.next()
        if let certificates = next, certificates.identifier == .contextSpecific(0) {
            self.certificatesDigest = SHA256.hash(certificates.encoded)
            var reader = try certificates.childReader(limits: limits)
            var count = 0
            while let certificate = try reader.next() {
                count += 1
                guard certificate.identifier == .sequence, count <= 8 else {
                    throw VerificationError(.malformedReceipt, "unexpected element in receipt certificates")
                }
            }
            next = try fields.next()
        }
        if let crls = next, crls.identifier == .contextSpecific(1) {
            next = try fields.next()
        }
        guard let signerInfos = next, signerInfos.identifier == .set else {
            throw VerificationError(.malformedReceipt, "receipt has no signerInfos")
        }
        guard try signerInfos.children(limits: limits).count == 1 else {
            throw VerificationError(.malformedReceipt, "receipt must have exactly one signer")
        }
        try fields.expectEnd("SignedData")
    }
}

// MARK: - OpenSSL wrappers (internal to receipts)

/// An owned `PKCS7 *` of signed data.
private final class OpenSSLPKCS7 {
    let pointer: UnsafeMutablePointer<PKCS7>
    /// The signer certificate (its own reference).
    let signer: OpenSSLCertificate

    init(der: [UInt8]) throws(VerificationError) {
        var consumed = 0
        let parsed: UnsafeMutablePointer<PKCS7>? = der.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            let result = d2i_PKCS7(nil, &cursor, buffer.count)
            if let cursor { consumed = cursor - base }
            return result
        }
        guard let parsed else {
            throw VerificationError(.malformedReceipt, "OpenSSL cannot parse the receipt: \(OpenSSLErrorQueue.drain())")
        }
        guard consumed == der.count else {
            PKCS7_free(parsed)
            throw VerificationError(.malformedReceipt, "\(der.count - consumed) trailing bytes after the receipt")
        }
        guard let signers = PKCS7_get0_signers(parsed, nil, 0) else {
            PKCS7_free(parsed)
            throw VerificationError(
                .receiptSignatureInvalid, "receipt signer certificate not found: \(OpenSSLErrorQueue.drain())")
        }
        defer { OPENSSL_sk_free(signers) }
        guard OPENSSL_sk_num(signers) == 1, let first = OPENSSL_sk_value(signers, 0) else {
            PKCS7_free(parsed)
            throw VerificationError(.malformedReceipt, "receipt must have exactly one signer")
        }
        self.pointer = parsed
        self.signer = OpenSSLCertificate(retaining: OpaquePointer(first))
    }

    deinit { PKCS7_free(self.pointer) }

    /// The `STACK_OF(X509) *` of the embedded certificates (owned by `pointer`; nil if none).
    var certificateStack: OpaquePointer? {
        guard let signed = self.pointer.pointee.d.sign else { return nil }
        return signed.pointee.cert
    }

    /// Checks the signature over the content and returns the content.
    func verifiedContent() throws(VerificationError) -> [UInt8] {
        guard let out = BIO_new(BIO_s_mem()) else {
            throw VerificationError(.internalCryptoError, "BIO_new failed")
        }
        defer { BIO_free(out) }
        // NOVERIFY: the chain is checked separately, at the receipt's creation time and without
        // OpenSSL's S/MIME purpose checks (Apple's signer has no extended key usage).
        let flags = Int32(PKCS7_NOVERIFY | PKCS7_BINARY)
        guard PKCS7_verify(self.pointer, nil, nil, nil, out, flags) == 1 else {
            throw VerificationError(
                .receiptSignatureInvalid, "receipt signature does not verify: \(OpenSSLErrorQueue.drain())")
        }
        var content: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { BIO_read(out, $0.baseAddress, Int32($0.count)) }
            if count <= 0 { break }
            content += chunk[0..<Int(count)]
            guard content.count <= Receipt.maximumPayloadSize else {
                throw VerificationError(.malformedReceipt, "receipt payload is too large")
            }
        }
        return content
    }
}

/// An owned `X509 *` (one reference, released in deinit).
private final class OpenSSLCertificate {
    let pointer: OpaquePointer

    /// Every certificate of a PEM text (a bundle may hold several); empty if there is none or
    /// one of them does not parse.
    static func all(pem: String) -> [OpenSSLCertificate] {
        var certificates: [OpenSSLCertificate] = []
        let complete: Bool = Array(pem.utf8).withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return false }
            defer { BIO_free(bio) }
            while let parsed = PEM_read_bio_X509(bio, nil, nil, nil) {
                certificates.append(OpenSSLCertificate(owning: parsed))
            }
            // The loop ends with "no start line" at the end of the text; any other error is a bad block.
            let error = ERR_peek_last_error()
            return certificates.isEmpty == false && (error == 0 || ERR_GET_REASON(error) == PEM_R_NO_START_LINE)
        }
        ERR_clear_error()
        return complete ? certificates : []
    }

    private init(owning pointer: OpaquePointer) {
        self.pointer = pointer
    }

    /// Takes a reference of its own on a certificate owned by another structure.
    init(retaining pointer: OpaquePointer) {
        X509_up_ref(pointer)
        self.pointer = pointer
    }

    deinit { X509_free(self.pointer) }

    /// SHA-256 of the certificate's DER encoding.
    var derDigest: [UInt8] {
        get throws(VerificationError) {
            var raw: UnsafeMutablePointer<UInt8>?
            let count = i2d_X509(self.pointer, &raw)
            guard count > 0, let raw else {
                throw VerificationError(.internalCryptoError, "i2d_X509: \(OpenSSLErrorQueue.drain())")
            }
            defer { COpenSSL_free(raw) }
            return SHA256.hash(UnsafeRawBufferPointer(start: raw, count: Int(count)))
        }
    }

    func hasExtension(_ oid: String) -> Bool {
        guard let object = OBJ_txt2obj(oid, 1) else { return false }
        defer { ASN1_OBJECT_free(object) }
        return X509_get_ext_by_OBJ(self.pointer, object, -1) >= 0
    }
}

/// The pinned roots in one `X509_STORE`, built once and then only read (OpenSSL locks its
/// lookups), hence `@unchecked Sendable`. Each verification has its own `X509_STORE_CTX`.
///
/// Chain results are cached: Apple signs every receipt of a year with the same signing
/// certificate, and checking its chain costs two P-384 verifications (about 1 ms), ten times the
/// rest of a receipt. A successful chain is remembered by (signer certificate, the receipt's
/// certificates) with the interval in which every certificate of the built chain is valid; a
/// later receipt with the same pair at a time inside that interval skips `X509_verify_cert`.
/// Signatures do not depend on time and the store never changes, so the result is the same.
/// The signer is part of the key: the same certificate set with another signer is verified anew.
private final class ReceiptTrustStore: @unchecked Sendable {
    private let store: OpaquePointer  // X509_STORE *
    private let chainCache = Mutex<[[UInt8]: ClosedRange<Int64>]>([:])
    /// Entries kept at most; the cache is emptied when full (only trusted chains get in).
    static let chainCacheCapacity = 64

    init(rootsPEM: [String]) throws(VerificationError) {
        guard let store = X509_STORE_new() else {
            throw VerificationError(.internalCryptoError, "X509_STORE_new: \(OpenSSLErrorQueue.drain())")
        }
        self.store = store  // freed by deinit from here on, also when init throws below
        for (index, pem) in rootsPEM.enumerated() {
            let roots = OpenSSLCertificate.all(pem: pem)
            guard !roots.isEmpty else {
                throw VerificationError(.malformedCertificate, "trust root \(index) is not PEM certificates")
            }
            for root in roots where X509_STORE_add_cert(store, root.pointer) != 1 {  // the store takes a reference
                throw VerificationError(.internalCryptoError, "X509_STORE_add_cert: \(OpenSSLErrorQueue.drain())")
            }
        }
    }

    deinit { X509_STORE_free(self.store) }

    /// Verifies `signer` up to a root at `time`, with the receipt's own certificates as the
    /// untrusted intermediates.
    func verifyChain(
        signer: OpenSSLCertificate, untrusted: OpenSSLPKCS7, certificatesDigest: [UInt8], at time: Date
    ) throws(VerificationError) {
        let seconds = Int64(time.timeIntervalSince1970.rounded(.down))
        let key = try signer.derDigest + certificatesDigest
        if self.chainCache.withLock({ $0[key]?.contains(seconds) ?? false }) {
            return
        }
        guard let context = X509_STORE_CTX_new() else {
            throw VerificationError(.internalCryptoError, "X509_STORE_CTX_new failed")
        }
        defer { X509_STORE_CTX_free(context) }
        let window = try withExtendedLifetime(untrusted) { () throws(VerificationError) -> ClosedRange<Int64>? in
            guard X509_STORE_CTX_init(context, self.store, signer.pointer, untrusted.certificateStack) == 1 else {
                throw VerificationError(.internalCryptoError, "X509_STORE_CTX_init: \(OpenSSLErrorQueue.drain())")
            }
            X509_STORE_CTX_set_time(context, 0, time_t(seconds))
            guard X509_verify_cert(context) == 1 else { return nil }
            return Self.validityWindow(of: context)
        }
        guard let window else {
            let code = X509_STORE_CTX_get_error(context)
            let text = X509_verify_cert_error_string(Int(code)).map { String(cString: $0) } ?? "unknown"
            throw VerificationError(
                .receiptChainInvalid,
                "receipt signer does not chain to a trusted root at \(RFC3339.format(time)): \(text) (X509 error \(code))"
            )
        }
        if window.contains(seconds) {
            self.chainCache.withLock { cache in
                if cache.count >= Self.chainCacheCapacity { cache.removeAll() }
                cache[key] = window
            }
        }
    }

    /// The interval in which every certificate of the verified chain is valid, or nil if a
    /// validity time cannot be read (then nothing is cached).
    private static func validityWindow(of context: OpaquePointer) -> ClosedRange<Int64>? {
        guard let chain = X509_STORE_CTX_get0_chain(context) else { return nil }
        var lower = Int64.min
        var upper = Int64.max
        for index in 0..<OPENSSL_sk_num(chain) {
            guard let raw = OPENSSL_sk_value(chain, index) else { return nil }
            let certificate = OpaquePointer(raw)
            guard let notBefore = seconds(X509_get0_notBefore(certificate)),
                let notAfter = seconds(X509_get0_notAfter(certificate))
            else { return nil }
            lower = max(lower, notBefore)
            upper = min(upper, notAfter)
        }
        return lower <= upper ? lower...upper : nil
    }

    private static func seconds(_ time: UnsafePointer<ASN1_TIME>?) -> Int64? {
        guard let time else { return nil }
        var broken = tm()
        guard ASN1_TIME_to_tm(time, &broken) == 1 else { return nil }
        return Int64(timegm(&broken))
    }
}
