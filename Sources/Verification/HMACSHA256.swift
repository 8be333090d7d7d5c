private import COpenSSL

/// HMAC-SHA256 (RFC 2104) and a constant-time comparison, through libcrypto.
public enum HMACSHA256 {
    public static let byteCount = 32

    /// The authentication code of `message` under `key`.
    public static func authenticationCode(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var length: UInt32 = 0
        return [UInt8](count: Self.byteCount) { output in
            let result = key.withUnsafeBytes { keyBytes in
                message.withUnsafeBytes { messageBytes in
                    HMAC(
                        EVP_sha256(), keyBytes.baseAddress, Int32(keyBytes.count),
                        messageBytes.bindMemory(to: UInt8.self).baseAddress, messageBytes.count,
                        output.baseAddress, &length)
                }
            }
            // Fails only on allocation failure inside OpenSSL: not recoverable.
            precondition(result != nil && length == 32, "HMAC-SHA256 failed")
        }
    }

    /// True when `a` and `b` are equal, in time that depends only on their lengths.
    public static func constantTimeEquals(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> Bool {
        let a = Array(a)
        let b = Array(b)
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { x in b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, x.count) }
        }
            == 0
    }
}
