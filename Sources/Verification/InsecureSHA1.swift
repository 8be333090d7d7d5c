private import COpenSSL

/// Digests that are broken for security and kept only where a protocol names something by
/// them (as swift-crypto's `Insecure`): never use these to verify anything.
public enum Insecure {
    /// SHA-1 through libcrypto's one-shot `EVP_Digest`. Its users name things by it: the
    /// gateway's Redis store a Lua script by the SHA-1 of its text (`EVALSHA`), and the WebSocket
    /// handshake the key it answers (`Sec-WebSocket-Accept`, RFC 6455 §4.2.2).
    public enum SHA1 {
        public static let byteCount = 20

        public static func hash(_ bytes: [UInt8]) -> [UInt8] {
            var length: UInt32 = 0
            return [UInt8](count: Self.byteCount) { output in
                let ok = bytes.withUnsafeBytes { input in
                    EVP_Digest(input.baseAddress, input.count, output.baseAddress, &length, EVP_sha1(), nil)
                }
                // Fails only on allocation failure inside OpenSSL: not recoverable.
                precondition(ok == 1 && length == UInt32(Self.byteCount), "EVP_Digest(SHA-1) failed")
            }
        }
    }
}
