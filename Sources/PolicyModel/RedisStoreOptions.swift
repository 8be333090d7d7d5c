/// The Redis settings of a policy besides the URL: where the password comes from (never the
/// policy text itself) and how long an unused key record lives.
public struct RedisStoreOptions: Sendable, Hashable {
    /// The password's source; it replaces any password in the URL.
    public var password: SecretSource?
    /// `key_idle_ttl`: unused key records expire after this long; nil = never.
    public var keyIdleTTL: Duration?
    /// `counter_durability: replica`: every counter advance waits (`WAIT 1`) for a replica's
    /// acknowledgement, at most `replicaWait`, and fails closed without one. nil: `primary`.
    public var replicaWait: Duration?
    /// `redis_tls:` (with a `rediss…://` URL): trust anchors, client certificate, server name.
    /// nil with a `rediss…://` URL: the system trust store, no client certificate.
    public var tls: RedisTLSConfiguration?
    /// `limits.store_command_timeout`, copied here so that a change rebuilds the store.
    public var commandTimeout: Duration = .milliseconds(250)

    /// How long `counter_durability: replica` waits for a replica: 100 ms (below the store's
    /// 250 ms command timeout).
    public static let defaultReplicaWait = Duration.milliseconds(100)

    public init(password: SecretSource? = nil, keyIdleTTL: Duration? = nil, replicaWait: Duration? = nil) {
        self.password = password
        self.keyIdleTTL = keyIdleTTL
        self.replicaWait = replicaWait
    }
}

/// Where a secret is read from. Holds the file path or variable name, never the secret.
public enum SecretSource: Sendable, Hashable, CustomStringConvertible {
    /// A file (a Kubernetes Secret mount, `/run/secrets/…`); one trailing newline is dropped.
    case file(String)
    /// An environment variable.
    case environment(String)

    public var description: String {
        switch self {
        case .file(let path): return "file \(path)"
        case .environment(let name): return "environment variable \(name)"
        }
    }
}

/// `redis_tls:`, for a `rediss://`, `rediss-cluster://` or `rediss-sentinel://` store: the same
/// keys as an `https://` upstream (`UpstreamTLSDecoder`). Verification is always on: the chain
/// against the system trust store or `caFile` alone, and the name.
public struct RedisTLSConfiguration: Sendable, Hashable {
    /// `server_name:`: SNI and the name the certificate must carry on every node; nil: the host
    /// each connection goes to (the URL's, or the address the cluster map or a sentinel names:
    /// then the certificates need those names or IP addresses).
    public var serverName: String?
    /// `ca_file:`: PEM file of trusted CAs (absolute path); nil = the system trust store.
    public var caFile: String?
    /// `client_certificate` + `client_private_key`: for servers with `tls-auth-clients yes`.
    public var clientCertificate: PEMCertificateKeyPair?

    public init(serverName: String? = nil, caFile: String? = nil, clientCertificate: PEMCertificateKeyPair? = nil) {
        self.serverName = serverName
        self.caFile = caFile
        self.clientCertificate = clientCertificate
    }
}
