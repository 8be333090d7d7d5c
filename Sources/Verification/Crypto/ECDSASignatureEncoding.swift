private import COpenSSL

/// Converts P-256 ECDSA signatures between DER `ECDSA-Sig-Value` (what OpenSSL and App Attest
/// use) and the fixed 64-byte `r ‖ s` of JOSE (ES256, RFC 7518 §3.4).
public enum ECDSASignatureEncoding {
    /// Bytes of one P-256 scalar.
    public static let scalarByteCount = 32

    /// `r ‖ s`, each left-padded to 32 bytes; nil when `der` is not one DER signature.
    public static func rs(fromDER der: [UInt8]) -> [UInt8]? {
        defer { ERR_clear_error() }
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let signature = d2i_ECDSA_SIG(nil, &cursor, buffer.count)
            // Trailing bytes after the SEQUENCE would make two encodings of one signature.
            if let signature, cursor != buffer.baseAddress.map({ $0 + buffer.count }) {
                ECDSA_SIG_free(signature)
                return nil
            }
            return signature
        }
        guard let parsed else { return nil }
        defer { ECDSA_SIG_free(parsed) }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(parsed, &r, &s)
        guard let r, let s else { return nil }
        var out = [UInt8](repeating: 0, count: 2 * Self.scalarByteCount)
        let written = out.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress else { return false }
            return BN_bn2binpad(r, base, Int32(Self.scalarByteCount)) == Int32(Self.scalarByteCount)
                && BN_bn2binpad(s, base + Self.scalarByteCount, Int32(Self.scalarByteCount))
                    == Int32(Self.scalarByteCount)
        }
        return written ? out : nil
    }

    /// The DER `ECDSA-Sig-Value` of a 64-byte `r ‖ s`; nil for any other length.
    public static func der(fromRS rs: [UInt8]) -> [UInt8]? {
        defer { ERR_clear_error() }
        guard rs.count == 2 * Self.scalarByteCount, let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let r = rs.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32(Self.scalarByteCount), nil) }
        let s = rs.withUnsafeBufferPointer {
            BN_bin2bn($0.baseAddress.map { $0 + Self.scalarByteCount }, Int32(Self.scalarByteCount), nil)
        }
        guard let r, let s else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        // set0 takes ownership of both numbers on success only.
        guard ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        var raw: UnsafeMutablePointer<UInt8>?
        let count = i2d_ECDSA_SIG(signature, &raw)
        guard count > 0, let raw else { return nil }
        defer { COpenSSL_free(raw) }
        return Array(UnsafeBufferPointer(start: raw, count: Int(count)))
    }
}
