/// One HTTP/1.1 request sent by the gateway's outbound HTTPS client (`OutboundHTTPClient`), as a
/// value, and its bytes on the wire.
///
/// `GET` or `POST`, with no credential, a bearer token the caller holds (Google's status list
/// and APIs: `Credential.none`, `.bearer`), or the client's own token (`.clientToken`: Apple's
/// JWT, `AppleClient`'s `OutboundHTTPRequest(endpoint:contentType:authorizationPrefix:body:)`).
/// The client's token is not part of the value: its `OutboundTokenSource` caches and re-signs
/// it on its own clock, so the same request can be retried with a newer token.
public struct OutboundHTTPRequest: Sendable, Hashable {
    /// What goes into `Authorization`.
    public enum Credential: Sendable, Hashable {
        /// `authorizationPrefix` + the current token of the client's `OutboundTokenSource` (the
        /// client must have one; a 401 makes it sign a new one).
        case clientToken
        /// `Bearer <token>`: a token the caller obtained (an OAuth access token); printable
        /// ASCII without spaces.
        case bearer(String)
        /// No `Authorization` header (a public document such as Google's status list).
        case none
    }

    /// `GET` or `POST` (anything else is the caller's bug and traps when serialized).
    public var method: String
    public var endpoint: OutboundHTTPEndpoint
    /// `application/json`, `application/octet-stream`, …; sent only with a body or a `POST`.
    public var contentType: String
    /// What precedes the client's token in `Authorization` with `.clientToken` (Apple's
    /// DeviceCheck: `Bearer `; its fraud-risk endpoint: nothing; docs/apple-services.md).
    public var authorizationPrefix: String
    public var credential: Credential
    public var body: [UInt8]
    /// The `service` label of the client's metrics (a documented label value, e.g.
    /// `devicecheck`, `android_revocation`).
    public var service: String

    /// `method` (`GET` or `POST`), the credential the host needs, and the metrics `service`
    /// label.
    public init(
        method: String, endpoint: OutboundHTTPEndpoint, credential: Credential, service: String,
        contentType: String = "application/json", body: [UInt8] = [], authorizationPrefix: String = ""
    ) {
        precondition(method == "GET" || method == "POST", "the outbound client sends GET or POST")
        self.method = method
        self.endpoint = endpoint
        self.contentType = contentType
        self.authorizationPrefix = authorizationPrefix
        self.credential = credential
        self.body = body
        self.service = service
    }

    /// Whether the client must supply its own token (`OutboundTokenSource`) for this request.
    public var needsClientToken: Bool { self.credential == .clientToken }

    /// The request's bytes: request line, `Host`, `Authorization` (unless `.none`),
    /// `Content-Type` and `Content-Length` (for a `POST` or a body), `Connection: keep-alive`
    /// (the client reuses connections), `Accept: */*`, then the body.
    ///
    /// `token` comes from the client's token source (Apple's JWT: base64url and dots only) and
    /// is used only with `.clientToken`;
    /// a credential with a line break or another control byte is a bug on our side, so it traps
    /// rather than splitting the head.
    public func serialized(token: String?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256 + (token?.utf8.count ?? 0) + self.body.count)
        func line(_ text: String) {
            out.append(contentsOf: text.utf8)
            out.append(contentsOf: [0x0D, 0x0A])
        }
        line("\(self.method) \(self.endpoint.path) HTTP/1.1")
        line("Host: \(self.endpoint.hostHeader)")
        switch self.credential {
        case .clientToken:
            let token = token ?? ""
            precondition(Self.isToken(token), "the client's token is printable ASCII without spaces")
            line("Authorization: \(self.authorizationPrefix)\(token)")
        case .bearer(let token):
            precondition(Self.isToken(token), "a bearer token is printable ASCII without spaces")
            line("Authorization: Bearer \(token)")
        case .none:
            break
        }
        if self.method == "POST" || !self.body.isEmpty {
            line("Content-Type: \(self.contentType)")
            line("Content-Length: \(self.body.count)")
        }
        line("Connection: keep-alive")
        line("Accept: */*")
        line("")
        out.append(contentsOf: self.body)
        return out
    }

    private static func isToken(_ text: String) -> Bool {
        text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }
}
