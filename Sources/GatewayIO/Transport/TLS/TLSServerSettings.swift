/// Everything a listener's TLS needs, as values (paths already resolved). Built into a
/// `TLSServerContext`; the same settings always build the same context from the same files.
package struct TLSServerSettings: Hashable, Sendable {
    /// Served to clients without SNI or with a name no `serverNameCertificates` entry matches.
    package var certificate: TLSCertificateFiles
    /// Extra certificates chosen by SNI. Default: none.
    package var serverNameCertificates: [TLSServerNameCertificate]
    /// A file of session ticket keys shared by several instances (nginx's
    /// `ssl_session_ticket_key` format: 80 bytes per key; the file holds 1 to 8 keys, the
    /// first encrypts new tickets, all decrypt). Re-read when the context is rebuilt (reload).
    /// Default nil: random keys made in memory, rotated every `ticketRotation`.
    package var ticketKeyFilePath: String?
    /// How often in-memory ticket keys are replaced; the previous key still decrypts for one
    /// more period, so a ticket resumes for up to two periods. Also the session lifetime
    /// given to clients. Default 12 hours.
    package var ticketRotation: Duration
    /// Server-side session cache entries (TLS 1.2 session IDs for clients without tickets).
    /// Default 20,480 (OpenSSL's default; about 1 KiB each when full).
    package var sessionCacheSize: Int
    /// Client certificates (mTLS). Default nil: none asked for.
    package var clientAuthentication: TLSClientAuthentication?
    /// ALPN offers `h2` before `http/1.1` (the listener's `tls.http2`). Default false.
    package var offersHTTP2: Bool = false

    package init(
        certificate: TLSCertificateFiles,
        serverNameCertificates: [TLSServerNameCertificate] = [],
        ticketKeyFilePath: String? = nil,
        ticketRotation: Duration = .seconds(12 * 3600),
        sessionCacheSize: Int = 20_480,
        clientAuthentication: TLSClientAuthentication? = nil
    ) {
        self.certificate = certificate
        self.serverNameCertificates = serverNameCertificates
        self.ticketKeyFilePath = ticketKeyFilePath
        self.ticketRotation = ticketRotation
        self.sessionCacheSize = sessionCacheSize
        self.clientAuthentication = clientAuthentication
    }
}
