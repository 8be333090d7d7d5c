private import COpenSSL

/// SHA-256 through an `EVP_MD` fetched once.
///
/// OpenSSL 3 fetches the implementation (under a global read lock) on every
/// `EVP_DigestInit_ex(…, EVP_sha256(), …)` and every one-shot `SHA256()`; on the
/// assertion hot path those fetches cost about 2 µs per hash, 7% of a P-256 verify.
/// Pre-fetching skips them. If the fetch ever fails, the implicit `EVP_sha256()` is used.
public enum SHA256 {
    public static let byteCount = 32

    /// Sendable: the fetched `EVP_MD` is immutable and reference counted by OpenSSL.
    private final class Method: @unchecked Sendable {
        let pointer: OpaquePointer?  // EVP_MD *

        init() {
            if let fetched = EVP_MD_fetch(nil, "SHA256", nil) {
                self.pointer = fetched
            } else {
                OpenSSLErrorQueue.clear()
                self.pointer = EVP_sha256()
            }
        }
    }

    private static let method = Method()

    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { Self.hash($0) }
    }

    public static func hash(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        bytes.withUnsafeBytes { Self.hash($0) }
    }

    public static func hash(_ buffer: UnsafeRawBufferPointer) -> [UInt8] {
        var length: UInt32 = 0
        let out = [UInt8](count: Self.byteCount) { output in
            let ok = EVP_Digest(buffer.baseAddress, buffer.count, output.baseAddress, &length, Self.method.pointer, nil)
            // Fails only on allocation failure inside OpenSSL: not recoverable.
            precondition(ok == 1, "EVP_Digest(SHA-256) failed")
        }
        return out
    }

    /// SHA256(a || b) without building the concatenation.
    public static func hash(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
        defer { EVP_MD_CTX_free(ctx) }
        var length: UInt32 = 0
        return [UInt8](count: Self.byteCount) { output in
            let ok =
                EVP_DigestInit_ex2(ctx, Self.method.pointer, nil) == 1
                && a.withUnsafeBytes({ EVP_DigestUpdate(ctx, $0.baseAddress, $0.count) }) == 1
                && b.withUnsafeBytes({ EVP_DigestUpdate(ctx, $0.baseAddress, $0.count) }) == 1
                && EVP_DigestFinal_ex(ctx, output.baseAddress, &length) == 1
            precondition(ok, "SHA-256 digest failed")
        }
    }
}

extension Collection<UInt8> {
    /// Lower-case hex, e.g. for clientData's body digest.
    ///
    /// `@inlinable` so that each caller gets a copy specialised to its collection: unspecialised,
    /// every element went through the generic iterator's witness (and a malloc), 16,000
    /// instructions for a 32-byte digest (callgrind, BENCHMARKS.md).
    @inlinable
    public var hexString: String {
        let count = self.count
        return String(unsafeUninitializedCapacity: 2 * count) { output in
            var position = 0
            for byte in self {
                output[position] = hexDigit(byte >> 4)
                output[position + 1] = hexDigit(byte & 0x0f)
                position += 2
            }
            return position
        }
    }
}

/// The lower-case ASCII hex digit of `nibble` (0...15).
@inlinable
func hexDigit(_ nibble: UInt8) -> UInt8 {
    nibble < 10 ? UInt8(ascii: "0") &+ nibble : UInt8(ascii: "a") &+ (nibble &- 10)
}
