private import CGatewayShims
private import COpenSSL

/// A listener's TLS configuration, built once from `TLSServerSettings` and shared by every
/// connection on every loop (OpenSSL's `SSL_CTX` is thread-safe for creating sessions once
/// configured; nothing here changes after `init` except the ticket keys, which are locked).
///
/// One `SSL_CTX` per certificate: the default one, plus one per SNI certificate that the
/// servername callback switches to (`SSL_set_SSL_CTX`, as nginx does): the certificate is
/// shared, not copied per connection. All of them get the same protocol settings.
///
/// Reload: build a new context from the new files; if that throws, keep the running one.
/// Connections keep the context they started with (each `TLSTransport` retains it).
package final class TLSServerContext: @unchecked Sendable {
    package let settings: TLSServerSettings
    /// Non-fatal findings (an expired certificate): log them at start-up and on reload.
    package let warnings: [TLSConfigurationWarning]
    package let ticketKeys: TLSTicketKeyRing

    /// The default context (first) and the SNI ones; freed in deinit.
    let defaultContext: OpaquePointer
    private let serverNameContexts: [OpaquePointer]
    private let serverNameTable: TLSServerNameTable

    /// Builds the context. `previous`: the context being replaced by a reload; when both use
    /// in-memory ticket keys, its key ring is kept so that tickets issued before the reload
    /// still resume.
    package init(settings: TLSServerSettings, previous: TLSServerContext? = nil) throws(TLSConfigurationError) {
        let ticketKeys: TLSTicketKeyRing
        if let path = settings.ticketKeyFilePath {
            ticketKeys = try TLSTicketKeyRing(keys: TLSTicketKey.keys(fromFile: path))
        } else if let previous, previous.settings.ticketKeyFilePath == nil,
            previous.settings.ticketRotation == settings.ticketRotation
        {
            ticketKeys = previous.ticketKeys
        } else {
            ticketKeys = try TLSTicketKeyRing.rotating(every: settings.ticketRotation)
        }

        var warnings: [TLSConfigurationWarning] = []
        var contexts: [OpaquePointer] = []
        let table = TLSServerNameTable()
        do throws(TLSConfigurationError) {
            let defaultContext = try Self.makeContext(settings: settings, ticketKeys: ticketKeys)
            contexts.append(defaultContext)
            try TLSCertificateLoader.install(settings.certificate, on: defaultContext, warnings: &warnings)
            for entry in settings.serverNameCertificates {
                let context = try Self.makeContext(settings: settings, ticketKeys: ticketKeys)
                contexts.append(context)
                let subjectAltNames = try TLSCertificateLoader.install(entry.files, on: context, warnings: &warnings)
                let names = entry.serverNames.isEmpty ? subjectAltNames : entry.serverNames
                guard !names.isEmpty else {
                    throw TLSConfigurationError(
                        .invalidServerName, path: entry.files.certificateChainPath,
                        "no server names configured and the certificate has no DNS subjectAltName")
                }
                for name in names {
                    try table.add(name, context: context, path: entry.files.certificateChainPath)
                }
            }
        } catch {
            contexts.forEach { SSL_CTX_free($0) }
            throw error
        }
        self.settings = settings
        self.warnings = warnings
        self.ticketKeys = ticketKeys
        self.defaultContext = contexts[0]
        self.serverNameContexts = Array(contexts.dropFirst())
        self.serverNameTable = table
        if !table.isEmpty {
            // Unretained: the table lives as long as this object, which outlives every
            // handshake (each TLSTransport retains its context).
            COpenSSL_SSL_CTX_set_servername_callback(
                self.defaultContext, serverNameCallback, Unmanaged.passUnretained(table).toOpaque())
        }
    }

    deinit {
        SSL_CTX_free(self.defaultContext)
        self.serverNameContexts.forEach { SSL_CTX_free($0) }
    }

    /// One SSL_CTX with the listener's protocol settings (no certificate yet).
    private static func makeContext(
        settings: TLSServerSettings, ticketKeys: TLSTicketKeyRing
    ) throws(TLSConfigurationError) -> OpaquePointer {
        TLSErrorQueue.clear()
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw TLSErrorQueue.configurationError(.openSSL, path: "", "SSL_CTX_new")
        }
        do throws(TLSConfigurationError) {
            try TLSProtocolSettings.apply(to: context, releasesBuffersAfterEachRecord: false)
            // The server's order (TLSCipherPolicy: AES-128-GCM first, the cheapest with AES-NI),
            // except that a client which lists ChaCha20-Poly1305 first (no AES hardware) gets
            // it. testssl.sh rates "no server cipher order" HIGH; this keeps the client's choice
            // where it matters and still answers every client the same way.
            _ = SSL_CTX_set_options(
                context, COpenSSL_SSL_OP_CIPHER_SERVER_PREFERENCE | COpenSSL_SSL_OP_PRIORITIZE_CHACHA)
            SSL_CTX_set_alpn_select_cb(
                context, settings.offersHTTP2 ? alpnSelectHTTP2Callback : alpnSelectCallback, nil)

            // Session IDs (TLS 1.2 clients without tickets) in OpenSSL's in-process cache; the
            // context id must be set, or resumption fails once client certificates are on.
            _ = COpenSSL_SSL_CTX_set_session_cache_mode(context, Int(SSL_SESS_CACHE_SERVER))
            _ = COpenSSL_SSL_CTX_sess_set_cache_size(context, settings.sessionCacheSize)
            let lifetime = min(settings.ticketRotation.components.seconds, 7 * 24 * 3600)  // TLS 1.3 cap
            _ = SSL_CTX_set_timeout(context, Int(lifetime))
            let sessionContext = Array("attest-gateway".utf8)
            guard SSL_CTX_set_session_id_context(context, sessionContext, UInt32(sessionContext.count)) == 1 else {
                throw TLSErrorQueue.configurationError(.openSSL, path: "", "SSL_CTX_set_session_id_context")
            }
            guard CGatewayShims_SSL_CTX_use_ticket_keys(context, ticketKeys.pointer) == 1 else {
                throw TLSErrorQueue.configurationError(.openSSL, path: "", "installing the session ticket key callback")
            }

            if let clientAuthentication = settings.clientAuthentication {
                try Self.requireClientCertificates(clientAuthentication, on: context)
            }
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        return context
    }

    private static func requireClientCertificates(
        _ authentication: TLSClientAuthentication, on context: OpaquePointer
    ) throws(TLSConfigurationError) {
        let path = authentication.caFilePath
        // Read once through the loader for a precise error (unreadable, not PEM, bad block).
        let authorities = try TLSCertificateLoader.loadCertificates(path)
        authorities.forEach { X509_free($0) }
        TLSErrorQueue.clear()
        guard SSL_CTX_load_verify_file(context, path) == 1 else {
            throw TLSErrorQueue.configurationError(.invalidCertificateAuthority, path: path, "SSL_CTX_load_verify_file")
        }
        // The CA names sent in CertificateRequest, so clients pick the right certificate.
        guard let names = SSL_load_client_CA_file(path) else {
            throw TLSErrorQueue.configurationError(.invalidCertificateAuthority, path: path, "SSL_load_client_CA_file")
        }
        SSL_CTX_set_client_CA_list(context, names)
        var mode = SSL_VERIFY_PEER
        if authentication.mode == .required { mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT }
        SSL_CTX_set_verify(context, mode, nil)
        SSL_CTX_set_verify_depth(context, 8)
    }
}

/// SNI: switch the connection to the SSL_CTX of the certificate for its server name. An
/// unknown name keeps the default certificate (the client decides whether to go on).
private let serverNameCallback:
    @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int32>?, UnsafeMutableRawPointer?) -> Int32 = {
        ssl, _, argument in
        guard let ssl, let argument, let name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) else {
            return SSL_TLSEXT_ERR_OK
        }
        let table = Unmanaged<TLSServerNameTable>.fromOpaque(argument).takeUnretainedValue()
        if let context = table.context(for: String(cString: name)) {
            _ = SSL_set_SSL_CTX(ssl, context)
        }
        return SSL_TLSEXT_ERR_OK
    }

/// ALPN: `http/1.1` when the client offers it; otherwise no ALPN at all (not a fatal alert:
/// a client offering only h2 may still speak HTTP/1.1 without ALPN, as curl does with
/// `--http1.1` on old versions).
private let alpnSelectCallback:
    @convention(c) (
        OpaquePointer?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, UnsafeMutablePointer<UInt8>?,
        UnsafePointer<UInt8>?, UInt32, UnsafeMutableRawPointer?
    ) -> Int32 = { _, out, outLength, offered, offeredLength, _ in
        alpnSelect(TLSCipherPolicy.alpnHTTP11, out, outLength, offered, offeredLength)
    }

/// ALPN on a listener that allows HTTP/2: `h2` when the client offers it (the server's
/// preference, whatever the client's order), else `http/1.1`, else none.
private let alpnSelectHTTP2Callback:
    @convention(c) (
        OpaquePointer?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, UnsafeMutablePointer<UInt8>?,
        UnsafePointer<UInt8>?, UInt32, UnsafeMutableRawPointer?
    ) -> Int32 = { _, out, outLength, offered, offeredLength, _ in
        let chosen = alpnSelect(TLSCipherPolicy.alpnHTTP2, out, outLength, offered, offeredLength)
        guard chosen != SSL_TLSEXT_ERR_OK else { return chosen }
        return alpnSelect(TLSCipherPolicy.alpnHTTP11, out, outLength, offered, offeredLength)
    }

/// Points `out` at `wanted`'s name in the client's list when it is there.
private func alpnSelect(
    _ wanted: [UInt8], _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?, _ outLength: UnsafeMutablePointer<UInt8>?,
    _ offered: UnsafePointer<UInt8>?, _ offeredLength: UInt32
) -> Int32 {
    guard let out, let outLength, let offered else { return SSL_TLSEXT_ERR_NOACK }
    var index = 0
    let count = Int(offeredLength)
    while index < count {
        let length = Int(offered[index])
        let start = index + 1
        guard start + length <= count else { break }
        if length == wanted.count - 1,
            (0..<length).allSatisfy({ offered[start + $0] == wanted[1 + $0] })
        {
            out.pointee = offered + start
            outLength.pointee = UInt8(length)
            return SSL_TLSEXT_ERR_OK
        }
        index = start + length
    }
    return SSL_TLSEXT_ERR_NOACK
}
