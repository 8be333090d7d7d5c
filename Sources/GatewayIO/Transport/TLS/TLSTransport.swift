private import CGatewayShims
private import COpenSSL
import Glibc

/// A TLS session over a connected, non-blocking TCP socket: the `ByteTransport` for HTTPS
/// on either side (`init(fd:server:)` for an accepted client, `init(fd:client:serverName:port:)`
/// for an upstream). The handshake runs inside the first `read`/`write` calls; until it is
/// done they return `.wouldBlock` with `waitsForWritable` saying which edge to wait for.
///
/// The `init(over:…)` forms run the same session over another transport instead of a socket
/// (the tests' in-memory pipe): OpenSSL reads and writes through it, and it is shut down and
/// closed with the session. Sockets never take that path.
///
/// Confined to its owner's loop, like the socket. Retains its context, so a reload that
/// replaces the listener's context never frees one under a live connection.
///
/// - Important: after `write` returned `.wouldBlock`, the next `write` must offer the same
///   bytes again (more may follow them; the buffer may have moved). OpenSSL has already
///   encrypted part of them into a record it must finish sending.
package final class TLSTransport: ByteTransport {
    package let fd: Int32
    /// The transport under the records when it is not a socket (`init(over:…)`); nil on a socket.
    private let stream: (any ByteTransport)?
    private var ssl: OpaquePointer?
    /// Kept alive for `ssl`'s `SSL_CTX` and the callbacks' arguments.
    private let serverContext: TLSServerContext?
    let clientContext: TLSClientContext?
    /// "host:port" of an upstream, for the session cache; nil on the server side.
    let sessionCacheKey: String?
    private var wantsWrite = false
    private var hasFailed = false
    private var cachedPeerSubject: String??
    /// Listed in its loop's `TLSIdleBufferSweep`.
    var awaitsBufferSweep = false
    /// Handled an event since the sweep's last tick (`TLSIdleBufferSweep`).
    var usedSinceSweep = false

    /// Set when the handshake failed because the peer's certificate did not verify.
    package private(set) var verificationFailure: TLSVerificationFailure?

    /// Server side of an accepted connection.
    package convenience init(fd: Int32, server: TLSServerContext) throws(TransportError) {
        try self.init(fd: fd, stream: nil, server: server)
    }

    /// Server side over `stream`, which the session owns from now on.
    package convenience init(over stream: any ByteTransport, server: TLSServerContext) throws(TransportError) {
        try self.init(fd: stream.fd, stream: stream, server: server)
    }

    private init(fd: Int32, stream: (any ByteTransport)?, server: TLSServerContext) throws(TransportError) {
        self.fd = fd
        self.stream = stream
        self.serverContext = server
        self.clientContext = nil
        self.sessionCacheKey = nil
        // OpenSSL's socket BIO writes with write(2): a reset peer must be EPIPE, not a signal.
        _ = SystemCalls.ignoreSIGPIPE
        TLSErrorQueue.clear()
        guard let ssl = SSL_new(server.defaultContext) else { throw Self.setupError("SSL_new") }
        self.ssl = ssl
        try self.attach(ssl)
        SSL_set_accept_state(ssl)
    }

    /// Client side towards `serverName` (a DNS name or an IP literal) on `port`: SNI for a
    /// DNS name, certificate checked against the name (or IP), resumption from the context's
    /// cache for "serverName:port".
    package convenience init(
        fd: Int32, client: TLSClientContext, serverName: String, port: Int
    ) throws(TransportError) {
        try self.init(fd: fd, stream: nil, client: client, serverName: serverName, port: port)
    }

    /// Client side over `stream`, which the session owns from now on.
    package convenience init(
        over stream: any ByteTransport, client: TLSClientContext, serverName: String, port: Int
    ) throws(TransportError) {
        try self.init(fd: stream.fd, stream: stream, client: client, serverName: serverName, port: port)
    }

    private init(
        fd: Int32, stream: (any ByteTransport)?, client: TLSClientContext, serverName: String, port: Int
    ) throws(TransportError) {
        self.fd = fd
        self.stream = stream
        self.serverContext = nil
        self.clientContext = client
        self.sessionCacheKey = "\(serverName):\(port)"
        _ = SystemCalls.ignoreSIGPIPE
        TLSErrorQueue.clear()
        guard let ssl = SSL_new(client.context) else { throw Self.setupError("SSL_new") }
        self.ssl = ssl
        try self.attach(ssl)
        let isIPAddress =
            serverName.contains(":") || serverName.utf8.allSatisfy { $0 == UInt8(ascii: ".") || ($0 >= 48 && $0 <= 57) }
        if isIPAddress {
            // RFC 6066: no SNI for an address; check the certificate's IP SAN instead.
            guard let parameters = SSL_get0_param(ssl), X509_VERIFY_PARAM_set1_ip_asc(parameters, serverName) == 1
            else {
                throw Self.setupError("X509_VERIFY_PARAM_set1_ip_asc \(serverName)")
            }
        } else {
            guard COpenSSL_SSL_set_tlsext_host_name(ssl, serverName) == 1 else {
                throw Self.setupError("SSL_set_tlsext_host_name \(serverName)")
            }
            guard SSL_set1_host(ssl, serverName) == 1 else { throw Self.setupError("SSL_set1_host \(serverName)") }
        }
        _ = COpenSSL_SSL_set_app_data(ssl, Unmanaged.passUnretained(self).toOpaque())
        _ = client.sessionCache.offer(for: self.sessionCacheKey!, to: ssl)
        SSL_set_connect_state(ssl)
    }

    private func attach(_ ssl: OpaquePointer) throws(TransportError) {
        guard self.stream != nil else {
            // SSL_set_fd, but the read side tells when a read drained the socket (`drained`).
            guard CGatewayShims_SSL_set_watched_fd(ssl, self.fd) == 1 else {
                throw Self.setupError("setting the socket")
            }
            return
        }
        // Unretained: the session, and so its BIO, never outlives this transport.
        let context = Unmanaged.passUnretained(self).toOpaque()
        let attached = CGatewayShims_SSL_set_stream(
            ssl, context,
            { context, buffer, length in
                guard let context, let buffer else { return -2 }
                return Unmanaged<TLSTransport>.fromOpaque(context).takeUnretainedValue()
                    .streamRead(into: buffer, count: length)
            },
            { context, buffer, length in
                guard let context, let buffer else { return -2 }
                return Unmanaged<TLSTransport>.fromOpaque(context).takeUnretainedValue()
                    .streamWrite(buffer, count: length)
            })
        guard attached == 1 else { throw Self.setupError("setting the stream") }
    }

    /// Frees the session if the owner never called `close()`, but leaves the descriptor
    /// alone: closing a number that may already belong to another socket is worse than a leak.
    deinit {
        if let ssl = self.ssl {
            _ = COpenSSL_SSL_set_app_data(ssl, nil)
            SSL_free(ssl)
            TLSErrorQueue.clear()
        }
    }

    // MARK: - ByteTransport

    package func read(into pointer: UnsafeMutableRawPointer, count: Int) throws(TransportError) -> IOResult {
        guard let ssl = self.ssl else { throw .tls(reason: "read after close") }
        TLSErrorQueue.clear()
        var transferred = 0
        let rc = SSL_read_ex(ssl, pointer, count, &transferred)
        if rc == 1 { return .processed(transferred) }
        return try self.failure(rc, errno, operation: "SSL_read")
    }

    package func write(_ pointer: UnsafeRawPointer, count: Int) throws(TransportError) -> IOResult {
        guard let ssl = self.ssl else { throw .tls(reason: "write after close") }
        // SSL_write_ex of nothing is an error in OpenSSL; write(2) of nothing is not.
        guard count > 0 else { return .processed(0) }
        TLSErrorQueue.clear()
        var transferred = 0
        let rc = SSL_write_ex(ssl, pointer, count, &transferred)
        if rc == 1 { return .processed(transferred) }
        return try self.failure(rc, errno, operation: "SSL_write")
    }

    /// Drives the handshake without application data (an upstream connection finishes it
    /// before it is leased, so a failure is told apart from a broken exchange). Returns true
    /// once it is done; false: wait for the edge `waitsForWritable` names and call again.
    package func handshake() throws(TransportError) -> Bool {
        guard let ssl = self.ssl else { throw .tls(reason: "handshake after close") }
        TLSErrorQueue.clear()
        let rc = SSL_do_handshake(ssl)
        if rc == 1 {
            self.wantsWrite = false
            return true
        }
        switch try self.failure(rc, errno, operation: "SSL_do_handshake") {
        case .wouldBlock: return false
        case .processed, .endOfFile: throw .tls(reason: "SSL_do_handshake: peer closed the connection")
        }
    }

    /// Drained when the socket's last read(2) came back short (read ahead asks for OpenSSL's
    /// whole buffer) and OpenSSL holds no byte of it, decrypted or not: the kernel was empty
    /// after everything this transport has read, so new data brings a new edge. Saves the
    /// SSL_read, and the read(2), that would only find the socket empty.
    package func drained(afterReading count: Int, of requested: Int) -> Bool {
        guard let ssl = self.ssl else { return false }
        return CGatewayShims_SSL_read_drained(ssl) == 1
    }

    package var waitsForWritable: Bool { self.wantsWrite }

    /// `close()` was called: the session and the descriptor are gone.
    var isClosed: Bool { self.ssl == nil }

    package var isHandshaking: Bool {
        guard let ssl = self.ssl else { return false }
        return SSL_is_init_finished(ssl) == 0
    }

    /// Frees OpenSSL's record buffers when no byte waits in them (read or to be written); the
    /// next read or write allocates them again. True when they were freed (or never held).
    @discardableResult
    func releaseIdleBuffers() -> Bool {
        guard let ssl = self.ssl else { return true }
        // SSL_has_pending first: unread plaintext points into the read buffer, which
        // SSL_free_buffers did not check before OpenSSL 3.0.14 (CVE-2024-4741).
        guard SSL_has_pending(ssl) == 0 else { return false }
        return SSL_free_buffers(ssl) == 1
    }

    /// close_notify (one non-blocking attempt: if the socket is full the alert is dropped,
    /// and the peer sees a TCP EOF, which HTTP/1.1 framing tolerates), then SHUT_WR.
    package func shutdownOutput() {
        if let ssl = self.ssl, !self.hasFailed, SSL_is_init_finished(ssl) == 1 {
            TLSErrorQueue.clear()
            _ = SSL_shutdown(ssl)
            TLSErrorQueue.clear()
        }
        if let stream = self.stream {
            stream.shutdownOutput()
        } else {
            shutdown(self.fd, Int32(SHUT_WR))
        }
    }

    package func close() {
        guard let ssl = self.ssl else { return }
        self.ssl = nil
        if !self.hasFailed {
            // An orderly close keeps a TLS 1.2 session in the server cache (OpenSSL would
            // otherwise treat the session as bad and drop it).
            SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN)
        }
        _ = COpenSSL_SSL_set_app_data(ssl, nil)
        SSL_free(ssl)
        TLSErrorQueue.clear()
        if let stream = self.stream {
            stream.close()
        } else {
            SystemCalls.close(self.fd)
        }
    }

    // MARK: - The stream under the records (`init(over:…)`), called by OpenSSL's BIO

    /// Bytes read, 0 at the end of the stream, `CGatewayShims_STREAM_WOULD_BLOCK`, or -2 on failure.
    private func streamRead(into buffer: UnsafeMutableRawPointer, count: Int) -> Int {
        guard let stream = self.stream else { return -2 }
        do {
            switch try stream.read(into: buffer, count: count) {
            case .processed(let n): return n
            case .wouldBlock: return CGatewayShims_STREAM_WOULD_BLOCK
            case .endOfFile: return 0
            }
        } catch {
            return -2
        }
    }

    /// Bytes written, `CGatewayShims_STREAM_WOULD_BLOCK`, or -2 on failure.
    private func streamWrite(_ buffer: UnsafeRawPointer, count: Int) -> Int {
        guard let stream = self.stream else { return -2 }
        do {
            switch try stream.write(buffer, count: count) {
            case .processed(let n): return n > 0 ? n : CGatewayShims_STREAM_WOULD_BLOCK
            case .wouldBlock: return CGatewayShims_STREAM_WOULD_BLOCK
            case .endOfFile: return -2
            }
        } catch {
            return -2
        }
    }

    // MARK: - Session facts (logs, headers)

    /// "TLSv1.3", "TLSv1.2" once the handshake is done.
    package var negotiatedProtocol: String? {
        guard let ssl = self.ssl, !self.isHandshaking else { return nil }
        return String(cString: SSL_get_version(ssl))
    }

    /// OpenSSL's name of the cipher in use ("TLS_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256").
    package var negotiatedCipher: String? {
        guard let ssl = self.ssl, !self.isHandshaking, let cipher = SSL_get_current_cipher(ssl) else { return nil }
        return String(cString: SSL_CIPHER_get_name(cipher))
    }

    /// The ALPN protocol agreed ("http/1.1"), nil when none was.
    package var negotiatedALPN: String? {
        guard let ssl = self.ssl else { return nil }
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// Whether the handshake resumed an earlier session (ticket or session ID).
    package var isResumed: Bool {
        guard let ssl = self.ssl else { return false }
        return SSL_session_reused(ssl) == 1
    }

    /// The SNI the client sent (server side) or we sent (client side).
    package var serverName: String? {
        guard let ssl = self.ssl, let name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) else { return nil }
        return String(cString: name)
    }

    /// The peer certificate's subject (RFC 2253, "CN=client,O=Example") when it presented one
    /// and it verified: on a listener with client certificates, the value for the upstream
    /// header. nil without a verified certificate.
    package var verifiedPeerSubject: String? {
        if let cached = self.cachedPeerSubject { return cached }
        guard let ssl = self.ssl, !self.isHandshaking else { return nil }
        var subject: String?
        if let certificate = SSL_get0_peer_certificate(ssl), SSL_get_verify_result(ssl) == X509_V_OK,
            let name = X509_get_subject_name(certificate)
        {
            subject = TLSCertificateLoader.nameText(name)
        }
        self.cachedPeerSubject = .some(subject)
        return subject
    }

    // MARK: - Errors

    /// Maps a failed SSL_read/SSL_write (rc != 1) to a result or a typed error.
    private func failure(_ rc: Int32, _ savedErrno: Int32, operation: String) throws(TransportError) -> IOResult {
        guard let ssl = self.ssl else { throw .tls(reason: "\(operation) after close") }
        let error = SSL_get_error(ssl, rc)
        switch error {
        case SSL_ERROR_WANT_READ:
            self.wantsWrite = false
            return .wouldBlock
        case SSL_ERROR_WANT_WRITE:
            self.wantsWrite = true
            return .wouldBlock
        case SSL_ERROR_ZERO_RETURN:
            // close_notify, or a TCP EOF (SSL_OP_IGNORE_UNEXPECTED_EOF). Before the handshake
            // is done that is a failed handshake (truncated ClientHello, port probe), not the
            // end of an HTTP stream.
            TLSErrorQueue.clear()
            if self.isHandshaking {
                self.hasFailed = true
                throw .tls(reason: "\(operation): unexpected eof: peer closed the connection during the handshake")
            }
            return .endOfFile
        case SSL_ERROR_SYSCALL:
            let detail = TLSErrorQueue.drain()
            self.hasFailed = true
            if savedErrno != 0, detail.isEmpty {
                throw .system(IOError(operation, errno: savedErrno))
            }
            throw .tls(reason: "\(operation): \(detail.isEmpty ? "connection closed by peer" : detail)")
        case SSL_ERROR_SSL:
            let detail = TLSErrorQueue.drain()
            self.hasFailed = true
            let verifyResult = SSL_get_verify_result(ssl)
            if verifyResult != X509_V_OK, self.isHandshaking {
                let failure = TLSVerificationFailure(verifyResult: verifyResult)
                self.verificationFailure = failure
                throw .tls(reason: "\(failure) (\(detail))")
            }
            throw .tls(reason: detail.isEmpty ? "\(operation) failed" : detail)
        default:
            TLSErrorQueue.clear()
            self.hasFailed = true
            throw .tls(reason: "\(operation): SSL_get_error \(error)")
        }
    }

    private static func setupError(_ operation: String) -> TransportError {
        let detail = TLSErrorQueue.drain()
        return .tls(reason: detail.isEmpty ? "\(operation) failed" : "\(operation) failed: \(detail)")
    }
}

@available(*, unavailable)
extension TLSTransport: Sendable {}
