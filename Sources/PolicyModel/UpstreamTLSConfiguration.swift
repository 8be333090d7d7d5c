/// TLS to an `https://` upstream. Verification is always on: the chain is checked against the
/// system trust store, or against `caFile` alone when given, and the certificate must name
/// `serverName`. There is deliberately no key to turn verification off; a private CA goes in
/// `ca_file`.
public struct UpstreamTLSConfiguration: Sendable, Hashable {
    /// Sent as SNI and checked against the certificate: `server_name:`, else the URL's host.
    public var serverName: String
    /// PEM file of trusted CAs (absolute path); nil = the system trust store.
    public var caFile: String?
    /// `client_certificate` + `client_private_key`, for mTLS to the upstream; nil = none.
    public var clientCertificate: PEMCertificateKeyPair?

    public init(serverName: String, caFile: String? = nil, clientCertificate: PEMCertificateKeyPair? = nil) {
        self.serverName = serverName
        self.caFile = caFile
        self.clientCertificate = clientCertificate
    }
}
