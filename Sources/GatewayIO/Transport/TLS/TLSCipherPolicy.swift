/// The protocol versions, cipher suites and groups both TLS contexts use (why: docs/tls.md).
enum TLSCipherPolicy {
    /// TLS 1.2: forward secrecy (ECDHE) and AEAD only (AES-GCM, ChaCha20-Poly1305); no CBC,
    /// no RSA key exchange, no DHE (slow, and weak groups in the wild). ECDSA first: the
    /// cheaper handshake when the certificate is ECDSA. Mozilla "intermediate" minus DHE.
    static let tls12Ciphers =
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
        + "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
        + "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

    /// TLS 1.3: all three standard AEAD suites (all strong; clients without AES hardware
    /// prefer ChaCha20). The CCM suites stay off, as in OpenSSL's default.
    static let tls13CipherSuites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

    /// Key exchange groups: X25519 first (fast, constant-time), then the NIST curves.
    static let groups = "X25519:P-256:P-384"

    /// ALPN wire format of the only protocol offered: "http/1.1".
    static let alpnHTTP11: [UInt8] = [8] + Array("http/1.1".utf8)
    /// ALPN wire format of "h2" (offered before http/1.1 where a listener allows HTTP/2).
    static let alpnHTTP2: [UInt8] = [2] + Array("h2".utf8)
}
