public import Foundation
private import COpenSSL

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
                .invalidPublicKey, "public key must be a 65-byte uncompressed X9.62 point, got \(publicKey.count) bytes")
        }
        let envelope = try ReceiptEnvelope(receipt)
        let signed = try OpenSSLPKCS7(der: receipt)
        let payload = try signed.verifiedContent()
        let parsed = try Receipt(payload: payload)

        let verificationTime = time ?? parsed.creationTime
        try self.trust.verifyChain(
            signer: signed.signer, untrusted: envelope.certificates, at: verificationTime)
        guard signed.signer.hasExtension(Self.receiptSigningMarkerOID) else {
            throw VerificationError(
                .receiptChainInvalid,
                "receipt signer lacks extension \(Self.receiptSigningMarkerOID): not a receipt-signing certificate")
        }

        if let appID, appID != parsed.appID {
            throw VerificationError(
                .receiptAppIDMismatch, "receipt App ID \"\(parsed.appID)\" is not the expected \"\(appID)\"")
        }
        guard let attested = OpenSSLCertificate(der: parsed.attestedCertificate) else {
            throw VerificationError(.malformedReceipt, "receipt field 3 is not a DER X.509 certificate")
        }
        if let publicKey {
            let certificateKey = attested.subjectPublicKeyBits
            guard certificateKey == publicKey else {
                throw VerificationError(
                    .receiptPublicKeyMismatch,
                    "receipt certificate key \(certificateKey.prefix(8).hexString)… is not the attested key "
                        + "\(publicKey.prefix(8).hexString)…")
            }
        }
        return parsed
    }
}

// MARK: - Structure (ASN1Reader, before any byte reaches OpenSSL)

/// The bounded BER walk of the PKCS#7 envelope: checks the shape OpenSSL is about to parse and
/// collects the embedded certificates (the untrusted intermediates of the chain).
private struct ReceiptEnvelope {
    static let signedDataOID = "1.2.840.113549.1.7.2"
    static let dataOID = "1.2.840.113549.1.7.1"

    var certificates: [[UInt8]] = []

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
            var reader = try certificates.childReader(limits: limits)
            while let certificate = try reader.next() {
                guard certificate.identifier == .sequence, self.certificates.count < 8 else {
                    throw VerificationError(.malformedReceipt, "unexpected element in receipt certificates")
                }
                self.certificates.append(Array(certificate.encoded))
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

    init?(der: [UInt8]) {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            let result = d2i_X509(nil, &cursor, buffer.count)
            guard let result, let cursor, cursor - base == buffer.count else {
                if let result { X509_free(result) }
                return nil
            }
            return result
        }
        guard let parsed else {
            ERR_clear_error()
            return nil
        }
        self.pointer = parsed
    }

    init?(pem: String) {
        let parsed: OpaquePointer? = Array(pem.utf8).withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_X509(bio, nil, nil, nil)
        }
        guard let parsed else {
            ERR_clear_error()
            return nil
        }
        self.pointer = parsed
    }

    /// Takes a reference of its own on a certificate owned by another structure.
    init(retaining pointer: OpaquePointer) {
        X509_up_ref(pointer)
        self.pointer = pointer
    }

    deinit { X509_free(self.pointer) }

    /// The subjectPublicKey BIT STRING content (for EC keys: the X9.62 point).
    var subjectPublicKeyBits: [UInt8] {
        guard let bits = X509_get0_pubkey_bitstr(self.pointer), let data = ASN1_STRING_get0_data(bits) else {
            return []
        }
        return Array(UnsafeBufferPointer(start: data, count: Int(ASN1_STRING_length(bits))))
    }

    func hasExtension(_ oid: String) -> Bool {
        guard let object = OBJ_txt2obj(oid, 1) else { return false }
        defer { ASN1_OBJECT_free(object) }
        return X509_get_ext_by_OBJ(self.pointer, object, -1) >= 0
    }
}

/// The pinned roots, parsed once. Immutable after init, so `@unchecked Sendable`:
/// each verification builds its own `X509_STORE`/`X509_STORE_CTX` over these certificates.
private final class ReceiptTrustStore: @unchecked Sendable {
    private let roots: [OpenSSLCertificate]

    init(rootsPEM: [String]) throws(VerificationError) {
        var roots: [OpenSSLCertificate] = []
        for pem in rootsPEM {
            guard let root = OpenSSLCertificate(pem: pem) else {
                throw VerificationError(.malformedCertificate, "trust root is not a PEM certificate")
            }
            roots.append(root)
        }
        self.roots = roots
    }

    func verifyChain(signer: OpenSSLCertificate, untrusted: [[UInt8]], at time: Date) throws(VerificationError) {
        guard let store = X509_STORE_new(), let context = X509_STORE_CTX_new(),
            let stack = OPENSSL_sk_new_null()
        else {
            throw VerificationError(.internalCryptoError, "cannot allocate an X509 store")
        }
        defer {
            X509_STORE_CTX_free(context)
            X509_STORE_free(store)
            OPENSSL_sk_free(stack)
        }
        for root in self.roots where X509_STORE_add_cert(store, root.pointer) != 1 {
            throw VerificationError(.internalCryptoError, "X509_STORE_add_cert: \(OpenSSLErrorQueue.drain())")
        }
        var intermediates: [OpenSSLCertificate] = []
        for der in untrusted {
            guard let certificate = OpenSSLCertificate(der: der) else {
                throw VerificationError(.malformedReceipt, "a receipt certificate is not DER X.509")
            }
            intermediates.append(certificate)
            _ = OPENSSL_sk_push(stack, UnsafeRawPointer(certificate.pointer))
        }
        let verified = withExtendedLifetime(intermediates) { () -> Bool in
            guard X509_STORE_CTX_init(context, store, signer.pointer, stack) == 1 else { return false }
            X509_STORE_CTX_set_time(context, 0, time_t(time.timeIntervalSince1970.rounded(.down)))
            return X509_verify_cert(context) == 1
        }
        guard verified else {
            let code = X509_STORE_CTX_get_error(context)
            let text = X509_verify_cert_error_string(Int(code)).map { String(cString: $0) } ?? "unknown"
            throw VerificationError(
                .receiptChainInvalid,
                "receipt signer does not chain to a trusted root at \(time): \(text) (X509 error \(code))")
        }
    }
}
