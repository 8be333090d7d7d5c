private import CJOSE

/// The thin wall around cjose (RFC 3394 key unwrap and AES-256-GCM, Debian's libcjose): the
/// only file in `Verification` that imports it. Bytes in, bytes out; no cjose type escapes.
enum JOSEDecryption {
    /// The plaintext of an already-checked compact JWE (`PlayIntegrityJWE`) under a 32-byte
    /// key, or nil when the key does not unwrap the content key or the tag does not verify.
    static func decryptA256KWA256GCM(compact: [UInt8], key: [UInt8]) -> [UInt8]? {
        var length = 0
        var errorCode: Int32 = 0
        let plaintext = compact.withUnsafeBufferPointer { text in
            key.withUnsafeBufferPointer { keyBytes in
                text.withMemoryRebound(to: CChar.self) { characters in
                    CJOSE_decrypt_compact(
                        characters.baseAddress, characters.count, keyBytes.baseAddress, keyBytes.count, &length,
                        &errorCode)
                }
            }
        }
        guard let plaintext else { return nil }
        defer { CJOSE_free(plaintext) }
        return Array(UnsafeBufferPointer(start: plaintext, count: length))
    }
}
