/// A listener's `tls:` block: what the TLS layer needs to terminate HTTPS from apps.
///
/// File paths are absolute (resolved against the policy file's directory) and were checked to
/// exist and be readable at load; their contents are the TLS layer's to parse.
public struct ListenerTLSConfiguration: Sendable, Hashable {
    /// Used when no `sni` entry matches the ClientHello's server name (or it sends none).
    public var defaultCertificate: PEMCertificateKeyPair
    /// Certificates chosen by server name, in policy order; names are unique across entries.
    public var serverNameCertificates: [ServerNameCertificate]
    /// mTLS; nil = no client certificate is requested.
    public var clientCertificates: ClientCertificates?
    /// nil = tickets with keys this process generates and rotates every `defaultTicketRotation`.
    public var sessionTickets: SessionTickets?
    /// A connection whose handshake has not completed by then is closed.
    public var handshakeTimeout: Duration
    /// The header carrying the verified client certificate's subject upstream. Every client-sent
    /// copy is removed on every listener (`GatewayPolicy.clientSubjectHeaderNames`).
    public var clientSubjectHeader: String
    /// `http2:` ALPN offers `h2` (preferred) beside `http/1.1`. Default true.
    public var http2: Bool = true

    /// `handshake_timeout` when absent.
    public static let defaultHandshakeTimeout = Duration.seconds(10)
    /// Largest `handshake_timeout`: beyond it a slow handshake holds a connection slot for
    /// longer than any real client needs (slowloris on the handshake).
    public static let maximumHandshakeTimeout = Duration.seconds(300)
    /// `client_subject_header` when absent.
    public static let defaultClientSubjectHeader = "X-Client-Cert-Subject"
    /// `session_tickets.rotation` when absent.
    public static let defaultTicketRotation = Duration.seconds(12 * 3600)

    public init(
        defaultCertificate: PEMCertificateKeyPair,
        serverNameCertificates: [ServerNameCertificate] = [],
        clientCertificates: ClientCertificates? = nil,
        sessionTickets: SessionTickets? = nil,
        handshakeTimeout: Duration = Self.defaultHandshakeTimeout,
        clientSubjectHeader: String = Self.defaultClientSubjectHeader
    ) {
        self.defaultCertificate = defaultCertificate
        self.serverNameCertificates = serverNameCertificates
        self.clientCertificates = clientCertificates
        self.sessionTickets = sessionTickets
        self.handshakeTimeout = handshakeTimeout
        self.clientSubjectHeader = clientSubjectHeader
    }

    /// One `sni:` entry.
    public struct ServerNameCertificate: Sendable, Hashable {
        /// Lowercase host names; `*.example.org` matches exactly one label left of `example.org`.
        public var serverNames: [String]
        public var certificate: PEMCertificateKeyPair

        public init(serverNames: [String], certificate: PEMCertificateKeyPair) {
            self.serverNames = serverNames
            self.certificate = certificate
        }
    }

    /// `client_certificates:` (mTLS).
    public struct ClientCertificates: Sendable, Hashable {
        /// PEM file of the CAs a client certificate must chain to.
        public var caFile: String
        public var mode: Mode

        public init(caFile: String, mode: Mode = .required) {
            self.caFile = caFile
            self.mode = mode
        }

        public enum Mode: String, Sendable, Hashable, CaseIterable {
            /// A certificate is requested; without one the handshake still succeeds (no subject
            /// header is sent), with an unverifiable one it fails.
            case optional
            /// The handshake fails without a certificate that verifies.
            case required
        }
    }

    /// `session_tickets:`: keys shared by every gateway behind one load balancer, so any of them
    /// resumes a session another one started.
    public struct SessionTickets: Sendable, Hashable {
        /// nginx `ssl_session_ticket_key` format: one or more 80-byte keys (16 name, 32 HMAC,
        /// 32 AES); the first encrypts new tickets, all decrypt. nil = keys generated in memory.
        public var keyFile: String?
        /// How often the keys change: generated keys are replaced, a key file is read again.
        public var rotation: Duration

        /// Size of one key in `keyFile`.
        public static let keyBytes = 80
        /// Most keys in one file (a rotation window, not a key store).
        public static let maximumKeys = 16

        public init(keyFile: String? = nil, rotation: Duration = ListenerTLSConfiguration.defaultTicketRotation) {
            self.keyFile = keyFile
            self.rotation = rotation
        }
    }
}
