import Foundation
private import COpenSSL

/// An `X509_STORE` holding the trust roots, built once and shared.
///
/// Sendable: never mutated after `init`. Each verification makes its own
/// `X509_STORE_CTX`; OpenSSL locks the store's internal lookups.
final class CertificateTrustStore: @unchecked Sendable {
    private let store: OpaquePointer  // X509_STORE *
    /// The store holds its own references; these are kept for inspection and lifetime clarity.
    private let roots: [ParsedCertificate]

    init(rootsPEM: [String]) throws(VerificationError) {
        guard let store = X509_STORE_new() else { throw OpenSSLErrorQueue.internalError("X509_STORE_new") }
        var roots: [ParsedCertificate] = []
        for (index, pem) in rootsPEM.enumerated() {
            let parsed: [ParsedCertificate]
            do {
                parsed = try ParsedCertificate.all(pem: pem, label: index == 0 ? "trust root" : "additional trust root \(index)")
            } catch {
                X509_STORE_free(store)
                throw error
            }
            for root in parsed {
                // Adding the same certificate twice is not an error in OpenSSL 3.
                guard X509_STORE_add_cert(store, root.pointer) == 1 else {
                    X509_STORE_free(store)
                    throw OpenSSLErrorQueue.internalError("X509_STORE_add_cert")
                }
                roots.append(root)
            }
        }
        self.store = store
        self.roots = roots
    }

    deinit {
        X509_STORE_free(self.store)
    }

    /// Verifies `leaf` through `intermediates` up to one of the roots, at `time`.
    ///
    /// - Throws: `certificate_expired` when `time` is outside a certificate's validity,
    ///   `certificate_chain_invalid` for any other failure (unknown issuer, bad signature, ...).
    func verify(leaf: ParsedCertificate, intermediates: [ParsedCertificate], at time: Date) throws(VerificationError) {
        guard let untrusted = OPENSSL_sk_new_null() else { throw OpenSSLErrorQueue.internalError("OPENSSL_sk_new_null") }
        defer { OPENSSL_sk_free(untrusted) }  // the certificates stay owned by their ParsedCertificate
        for certificate in intermediates {
            guard OPENSSL_sk_push(untrusted, UnsafeRawPointer(certificate.pointer)) > 0 else {
                throw OpenSSLErrorQueue.internalError("OPENSSL_sk_push")
            }
        }
        guard let ctx = X509_STORE_CTX_new() else { throw OpenSSLErrorQueue.internalError("X509_STORE_CTX_new") }
        defer { X509_STORE_CTX_free(ctx) }
        guard X509_STORE_CTX_init(ctx, self.store, leaf.pointer, untrusted) == 1 else {
            throw OpenSSLErrorQueue.internalError("X509_STORE_CTX_init")
        }
        X509_STORE_CTX_set_time(ctx, 0, time_t(time.timeIntervalSince1970.rounded(.down)))

        let result = withExtendedLifetime(intermediates) { X509_verify_cert(ctx) }
        if result == 1 {
            return
        }
        let code = X509_STORE_CTX_get_error(ctx)
        let depth = X509_STORE_CTX_get_error_depth(ctx)
        let text = X509_verify_cert_error_string(Int(code)).map { String(cString: $0) } ?? "error \(code)"
        OpenSSLErrorQueue.clear()
        let which = depth == 0 ? "x5c[0] (credential certificate)" : "chain certificate at depth \(depth)"
        switch code {
        case X509_V_ERR_CERT_HAS_EXPIRED, X509_V_ERR_CERT_NOT_YET_VALID:
            throw VerificationError(.certificateExpired, "\(which) is not valid at \(Self.format(time)): \(text)")
        default:
            throw VerificationError(.certificateChainInvalid, "\(which) does not verify up to a pinned root: \(text)")
        }
    }

    static func format(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var broken = tm()
        guard gmtime_r(&seconds, &broken) != nil else { return "\(date)" }
        func pad(_ n: Int32, _ width: Int) -> String {
            let text = String(n)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(broken.tm_year + 1900, 4))-\(pad(broken.tm_mon + 1, 2))-\(pad(broken.tm_mday, 2))T"
            + "\(pad(broken.tm_hour, 2)):\(pad(broken.tm_min, 2)):\(pad(broken.tm_sec, 2))Z"
    }
}
