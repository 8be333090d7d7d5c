private import COpenSSL

/// TLS towards one upstream (or Apple, or a `rediss://` server): trust anchors, optional
/// client certificate, and the per-host session cache. Shared by every loop; immutable after
/// `init` apart from the session cache (locked).
///
/// Verification is always on: the chain against the system store or `caFilePath`, and the
/// host name (`SSL_set1_host`, in `TLSTransport.init(fd:client:serverName:port:)`).
package final class TLSClientContext: @unchecked Sendable {
    package let settings: TLSClientSettings
    package let warnings: [TLSConfigurationWarning]
    let context: OpaquePointer
    let sessionCache: TLSSessionCache

    /// `releasesBuffersAfterEachRecord`: true (`SSL_MODE_RELEASE_BUFFERS`) unless the owner
    /// frees idle connections' buffers itself, as upstream pools do with the loop's
    /// `TLSIdleBufferSweep`.
    package init(settings: TLSClientSettings, releasesBuffersAfterEachRecord: Bool = true) throws(TLSConfigurationError)
    {
        TLSErrorQueue.clear()
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            throw TLSErrorQueue.configurationError(.openSSL, path: "", "SSL_CTX_new")
        }
        var warnings: [TLSConfigurationWarning] = []
        do throws(TLSConfigurationError) {
            try TLSProtocolSettings.apply(to: context, releasesBuffersAfterEachRecord: releasesBuffersAfterEachRecord)
            if let path = settings.caFilePath {
                let authorities = try TLSCertificateLoader.loadCertificates(path)
                authorities.forEach { X509_free($0) }
                TLSErrorQueue.clear()
                guard SSL_CTX_load_verify_file(context, path) == 1 else {
                    throw TLSErrorQueue.configurationError(
                        .invalidCertificateAuthority, path: path, "SSL_CTX_load_verify_file")
                }
            } else {
                guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                    throw TLSErrorQueue.configurationError(
                        .invalidCertificateAuthority, path: "", "SSL_CTX_set_default_verify_paths (system trust store)")
                }
            }
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
            SSL_CTX_set_verify_depth(context, 8)
            if let files = settings.clientCertificate {
                try TLSCertificateLoader.install(files, on: context, warnings: &warnings)
            }
            // SSL_CTX_set_alpn_protos returns 0 on success (unlike the rest of the API).
            let alpn = settings.offersHTTP2 ? TLSCipherPolicy.alpnHTTP2 : TLSCipherPolicy.alpnHTTP11
            guard SSL_CTX_set_alpn_protos(context, alpn, UInt32(alpn.count)) == 0 else {
                throw TLSErrorQueue.configurationError(.openSSL, path: "", "SSL_CTX_set_alpn_protos")
            }
            // Sessions are handed to `sessionCache` by the new-session callback (TLS 1.3
            // tickets arrive after the handshake, so that is the only reliable moment);
            // OpenSSL's own client cache stays off.
            _ = COpenSSL_SSL_CTX_set_session_cache_mode(
                context, Int(SSL_SESS_CACHE_CLIENT) | Int(SSL_SESS_CACHE_NO_INTERNAL_STORE))
            SSL_CTX_sess_set_new_cb(context, newSessionCallback)
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        self.settings = settings
        self.warnings = warnings
        self.context = context
        self.sessionCache = TLSSessionCache(capacity: settings.sessionCacheCapacity)
    }

    deinit {
        SSL_CTX_free(self.context)
    }

    /// Hosts with a session kept for resumption.
    package var cachedSessionCount: Int { self.sessionCache.count }

    /// Whether `SSL_MODE_RELEASE_BUFFERS` is on (`TLSProtocolSettings`): an idle connection
    /// then holds no record buffers. Off for upstream pools given a sweep (their idle
    /// connections are swept instead). Setting no new bits returns the mode.
    package var releasesIdleBuffers: Bool {
        COpenSSL_SSL_CTX_set_mode(self.context, 0) & Int(SSL_MODE_RELEASE_BUFFERS) != 0
    }
}

/// A new (resumable) session for a client connection: keep it under the transport's
/// "host:port". Returning 1 tells OpenSSL we took the reference.
private let newSessionCallback: @convention(c) (OpaquePointer?, OpaquePointer?) -> Int32 = { ssl, session in
    guard let ssl, let session, let owner = COpenSSL_SSL_get_app_data(ssl) else { return 0 }
    let transport = Unmanaged<TLSTransport>.fromOpaque(owner).takeUnretainedValue()
    guard let key = transport.sessionCacheKey, let cache = transport.clientContext?.sessionCache,
        SSL_SESSION_is_resumable(session) == 1
    else { return 0 }
    cache.store(session, for: key)
    return 1
}
