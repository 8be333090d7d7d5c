private import COpenSSL
import Foundation
import Synchronization

/// An `X509_STORE` holding the trust roots, built once and shared.
///
/// Sendable: the store is never mutated after `init`; each verification makes its own
/// `X509_STORE_CTX` and OpenSSL locks the store's internal lookups. The only mutable
/// state is `verifiedIntermediates`, behind a `Mutex`.
///
/// Intermediate cache: an attestation chain costs two P-384 signature checks (Apple's
/// intermediate and root are P-384), and every attestation carries one of a handful of
/// Apple intermediates. After an intermediate has chained to a root in a full
/// verification, later chains with byte-identical intermediates are first checked with
/// that intermediate as the trust anchor (`X509_V_FLAG_PARTIAL_CHAIN`): the leaf's
/// signature, the leaf's and the intermediate's validity at the verification time and
/// the chain extensions are still checked by OpenSSL, and the root's validity by us; only
/// the time-independent root-over-intermediate signature is not recomputed. Any failure
/// of that shortcut falls back to the full verification, so errors are always the full
/// path's.
final class CertificateTrustStore: @unchecked Sendable {
    private let store: OpaquePointer  // X509_STORE *
    /// The store holds its own references; these are kept for inspection and lifetime clarity.
    private let roots: [ParsedCertificate]

    private struct VerifiedIntermediate: Sendable {
        let certificate: ParsedCertificate
        /// Intersection of the validity periods of the certificates above it (the root).
        let issuersValidity: ClosedRange<Date>
    }

    /// Apple uses a few intermediates; more than this are not cached (no unbounded growth).
    static let maxCachedIntermediates = 16
    private let verifiedIntermediates = Mutex<[[UInt8]: VerifiedIntermediate]>([:])

    /// How many intermediates the shortcut may use (tests).
    var cachedIntermediateCount: Int {
        self.verifiedIntermediates.withLock { $0.count }
    }

    init(rootsPEM: [String]) throws(VerificationError) {
        guard let store = X509_STORE_new() else { throw OpenSSLErrorQueue.internalError("X509_STORE_new") }
        var roots: [ParsedCertificate] = []
        for (index, pem) in rootsPEM.enumerated() {
            let parsed: [ParsedCertificate]
            do {
                parsed = try ParsedCertificate.all(
                    pem: pem, label: index == 0 ? "trust root" : "additional trust root \(index)")
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
    /// - Parameter intermediateDER: the DER of each intermediate (cache key).
    /// - Throws: `certificate_expired` when `time` is outside a certificate's validity,
    ///   `certificate_chain_invalid` for any other failure (unknown issuer, bad signature, ...).
    func verify(leaf: ParsedCertificate, intermediates: [ParsedCertificate], intermediateDER: [[UInt8]], at time: Date)
        throws(VerificationError)
    {
        let cacheKey = intermediates.count == 1 && intermediateDER.count == 1 ? intermediateDER[0] : nil
        if let cacheKey, let cached = self.verifiedIntermediates.withLock({ $0[cacheKey] }),
            cached.issuersValidity.contains(time),
            self.verifyUnderVerifiedIntermediate(leaf: leaf, anchor: cached.certificate, at: time)
        {
            return
        }
        let issuersValidity = try self.verifyFullChain(leaf: leaf, intermediates: intermediates, at: time)
        if let cacheKey, let issuersValidity {
            self.verifiedIntermediates.withLock { cache in
                if cache.count < Self.maxCachedIntermediates {
                    cache[cacheKey] = VerifiedIntermediate(
                        certificate: intermediates[0], issuersValidity: issuersValidity)
                }
            }
        }
    }

    /// The shortcut: `leaf` under `anchor` alone (partial chain). True only on success.
    func verifyUnderVerifiedIntermediate(leaf: ParsedCertificate, anchor: ParsedCertificate, at time: Date) -> Bool {
        guard let trusted = OPENSSL_sk_new_null() else {
            OpenSSLErrorQueue.clear()
            return false
        }
        defer { OPENSSL_sk_free(trusted) }
        guard OPENSSL_sk_push(trusted, UnsafeRawPointer(anchor.pointer)) > 0, let ctx = X509_STORE_CTX_new() else {
            OpenSSLErrorQueue.clear()
            return false
        }
        defer { X509_STORE_CTX_free(ctx) }
        guard X509_STORE_CTX_init(ctx, nil, leaf.pointer, nil) == 1 else {
            OpenSSLErrorQueue.clear()
            return false
        }
        X509_STORE_CTX_set0_trusted_stack(ctx, trusted)
        X509_STORE_CTX_set_flags(ctx, UInt(X509_V_FLAG_PARTIAL_CHAIN))
        X509_STORE_CTX_set_time(ctx, 0, time_t(time.timeIntervalSince1970.rounded(.down)))
        let result = withExtendedLifetime(anchor) { X509_verify_cert(ctx) }
        // The chain must be exactly leaf -> anchor.
        let ok = result == 1 && X509_STORE_CTX_get0_chain(ctx).map { OPENSSL_sk_num($0) } == 2
        OpenSSLErrorQueue.clear()
        return ok
    }

    /// The full verification up to a root. Returns the intersection of the validity
    /// periods of the certificates above the first intermediate (nil if not applicable).
    private func verifyFullChain(leaf: ParsedCertificate, intermediates: [ParsedCertificate], at time: Date)
        throws(VerificationError) -> ClosedRange<Date>?
    {
        guard let untrusted = OPENSSL_sk_new_null() else {
            throw OpenSSLErrorQueue.internalError("OPENSSL_sk_new_null")
        }
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
            // Cacheable only as leaf, x5c[1] itself (not a look-alike OpenSSL found in the
            // store), root: then record the validity of the root above it.
            guard intermediates.count == 1, let chain = X509_STORE_CTX_get0_chain(ctx), OPENSSL_sk_num(chain) == 3,
                let middle = OPENSSL_sk_value(chain, 1), X509_cmp(OpaquePointer(middle), intermediates[0].pointer) == 0,
                let top = OPENSSL_sk_value(chain, 2)
            else { return nil }
            return ParsedCertificate.validity(of: OpaquePointer(top))
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
