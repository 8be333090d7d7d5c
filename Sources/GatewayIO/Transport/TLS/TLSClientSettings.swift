/// TLS towards an HTTPS upstream (and later Apple's servers and `rediss://`). There is no
/// setting that turns verification off: a private CA goes in `caFilePath`.
package struct TLSClientSettings: Hashable, Sendable {
    /// PEM file of the CAs trusted for this upstream. Default nil: the system trust store
    /// (Debian: /etc/ssl/certs/ca-certificates.crt, through OpenSSL's default paths).
    package var caFilePath: String?
    /// A client certificate for mTLS to the upstream. Default nil.
    package var clientCertificate: TLSCertificateFiles?
    /// Hosts whose last session is kept for resumption. Default 256.
    package var sessionCacheCapacity: Int
    /// ALPN offers `h2` alone instead of `http/1.1` (an upstream with `protocol: h2`). Default false.
    package var offersHTTP2 = false

    package init(
        caFilePath: String? = nil, clientCertificate: TLSCertificateFiles? = nil, sessionCacheCapacity: Int = 256
    ) {
        self.caFilePath = caFilePath
        self.clientCertificate = clientCertificate
        self.sessionCacheCapacity = sessionCacheCapacity
    }
}
