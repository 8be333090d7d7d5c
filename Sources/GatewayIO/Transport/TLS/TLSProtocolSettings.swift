private import COpenSSL

/// The settings every gateway SSL_CTX gets, server or client (why each: docs/tls.md).
enum TLSProtocolSettings {
    /// `releasesBuffersAfterEachRecord`: `SSL_MODE_RELEASE_BUFFERS`, for the Apple and `rediss://`
    /// clients (an idle connection holds no buffers). Listeners and upstream pools keep theirs
    /// between requests and give them back at the loop's tick once idle (`TLSIdleBufferSweep`).
    static func apply(to context: OpaquePointer, releasesBuffersAfterEachRecord: Bool) throws(TLSConfigurationError) {
        // TLS 1.2 and 1.3 only, whatever /etc/ssl/openssl.cnf says.
        guard COpenSSL_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) == 1,
            COpenSSL_SSL_CTX_set_max_proto_version(context, TLS1_3_VERSION) == 1
        else {
            throw TLSErrorQueue.configurationError(.openSSL, path: "", "setting TLS 1.2 to 1.3")
        }
        // No renegotiation (a CPU DoS lever and a source of confusion), no compression
        // (CRIME), and a TCP EOF without close_notify is end of stream, not an error: the
        // HTTP parser checks framing, so truncation is detected there (as nginx and curl do).
        _ = SSL_CTX_set_options(
            context,
            COpenSSL_SSL_OP_NO_RENEGOTIATION | COpenSSL_SSL_OP_NO_COMPRESSION | COpenSSL_SSL_OP_IGNORE_UNEXPECTED_EOF)
        guard SSL_CTX_set_cipher_list(context, TLSCipherPolicy.tls12Ciphers) == 1 else {
            throw TLSErrorQueue.configurationError(.openSSL, path: "", "SSL_CTX_set_cipher_list")
        }
        guard SSL_CTX_set_ciphersuites(context, TLSCipherPolicy.tls13CipherSuites) == 1 else {
            throw TLSErrorQueue.configurationError(.openSSL, path: "", "SSL_CTX_set_ciphersuites")
        }
        guard COpenSSL_SSL_CTX_set1_groups_list(context, TLSCipherPolicy.groups) == 1 else {
            throw TLSErrorQueue.configurationError(.openSSL, path: "", "SSL_CTX_set1_groups_list")
        }
        // RELEASE_BUFFERS: an idle connection holds no 16 KiB+ record buffers (bounded idle
        // memory), at the price of a malloc and a free of each buffer per record
        // (~1.3k instructions a TLS request). PARTIAL_WRITE: SSL_write returns after each record, like write(2).
        // ACCEPT_MOVING_WRITE_BUFFER: a retried write may come from a moved buffer (the
        // caller's output buffer compacts between calls; the bytes are the same).
        // NO_AUTO_CHAIN: send exactly the chain from the certificate file, as nginx does. Without
        // it OpenSSL builds a chain from the context's trust store on every handshake whose file
        // holds a leaf alone, and with mTLS on it appends certificates from the client CA file.
        _ = COpenSSL_SSL_CTX_set_mode(
            context,
            (releasesBuffersAfterEachRecord ? Int(SSL_MODE_RELEASE_BUFFERS) : 0) | Int(SSL_MODE_ENABLE_PARTIAL_WRITE)
                | Int(SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER) | Int(SSL_MODE_NO_AUTO_CHAIN))
        // Read ahead: one read(2) takes a whole record (and whatever follows it) instead of two,
        // the 5-byte header and then the body, as nginx does. A request in one record costs one
        // read(2) plus the read that finds the socket empty (3 before). Bytes read ahead stay in
        // OpenSSL's buffer; `TLSTransport.drained` tells the owner whether to read again.
        _ = COpenSSL_SSL_CTX_set_read_ahead(context, 1)
    }
}
