private import COpenSSL

/// SHA-256 through libcrypto's one-shot `SHA256()` (not deprecated in OpenSSL 3).
public enum SHA256 {
    public static let byteCount = 32

    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { Self.hash($0) }
    }

    public static func hash(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        bytes.withUnsafeBytes { Self.hash($0) }
    }

    public static func hash(_ buffer: UnsafeRawBufferPointer) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: Self.byteCount) { out, count in
            _ = COpenSSL.SHA256(buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), buffer.count, out.baseAddress)
            count = Self.byteCount
        }
    }

    /// SHA256(a || b) without building the concatenation.
    public static func hash(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
        defer { EVP_MD_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: Self.byteCount)
        var length: UInt32 = 0
        _ = EVP_DigestInit_ex(ctx, EVP_sha256(), nil)
        _ = a.withUnsafeBytes { EVP_DigestUpdate(ctx, $0.baseAddress, $0.count) }
        _ = b.withUnsafeBytes { EVP_DigestUpdate(ctx, $0.baseAddress, $0.count) }
        _ = out.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(ctx, $0.baseAddress, &length) }
        return out
    }
}

extension Collection<UInt8> {
    /// Lower-case hex, e.g. for clientData's body digest.
    public var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(self.count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
