private import COpenSSL

/// SHA-256 through an `EVP_MD` fetched once.
///
/// OpenSSL 3 fetches the implementation (under a global read lock) on every
/// `EVP_DigestInit_ex(…, EVP_sha256(), …)` and every one-shot `SHA256()`; on the
/// assertion hot path those fetches cost about 2 µs per hash, 7% of a P-256 verify.
/// Pre-fetching skips them. Results are identical to `SHA256.hash`.
enum FetchedSHA256 {
    /// Sendable: the fetched `EVP_MD` is immutable and reference counted by OpenSSL.
    private final class Method: @unchecked Sendable {
        let pointer: OpaquePointer?  // EVP_MD *, nil if the fetch failed

        init() {
            self.pointer = EVP_MD_fetch(nil, "SHA256", nil)
            if self.pointer == nil { OpenSSLErrorQueue.clear() }
        }
    }

    private static let method = Method()

    /// SHA256(a || b).
    static func hash(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        guard let md = Self.method.pointer, let ctx = EVP_MD_CTX_new() else { return SHA256.hash(a, b) }
        defer { EVP_MD_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: SHA256.byteCount)
        var length: UInt32 = 0
        guard EVP_DigestInit_ex2(ctx, md, nil) == 1,
              a.withUnsafeBytes({ EVP_DigestUpdate(ctx, $0.baseAddress, $0.count) }) == 1,
              b.withUnsafeBytes({ EVP_DigestUpdate(ctx, $0.baseAddress, $0.count) }) == 1,
              out.withUnsafeMutableBufferPointer({ EVP_DigestFinal_ex(ctx, $0.baseAddress, &length) }) == 1
        else {
            OpenSSLErrorQueue.clear()
            return SHA256.hash(a, b)
        }
        return out
    }

    /// SHA256(bytes).
    static func hash(_ bytes: [UInt8]) -> [UInt8] {
        guard let md = Self.method.pointer else { return SHA256.hash(bytes) }
        var out = [UInt8](repeating: 0, count: SHA256.byteCount)
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBytes { input in
            out.withUnsafeMutableBufferPointer { output in
                EVP_Digest(input.baseAddress, input.count, output.baseAddress, &length, md, nil)
            }
        }
        guard ok == 1 else {
            OpenSSLErrorQueue.clear()
            return SHA256.hash(bytes)
        }
        return out
    }
}
