/// One HTTP/1.1 request sent by the gateway's outbound HTTPS client (`AppleHTTPClient`), as a
/// value, and its bytes on the wire.
///
/// Apple's two services take `POST` with a small body and a JWT in `Authorization`
/// (`Credential.appleJWT`). The JWT is not part of the value: it is cached and re-signed on its
/// own clock (`AppleJWTCache`), so the same request can be retried with a newer token. Other
/// hosts (Google's revocation status list, Google's APIs) use the same client with `GET` or
/// `POST`, no credential or a bearer token the caller holds (`Credential.none`, `.bearer`).
public struct AppleHTTPRequest: Sendable, Hashable {
    /// What goes into `Authorization`.
    public enum Credential: Sendable, Hashable {
        /// `authorizationPrefix` + the client's current Apple JWT (the client must have an
        /// `AppleJWTCache`; a 401 makes it sign a new one).
        case appleJWT
        /// `Bearer <token>`: a token the caller obtained (an OAuth access token); printable
        /// ASCII without spaces.
        case bearer(String)
        /// No `Authorization` header (a public document such as Google's status list).
        case none
    }

    /// `GET` or `POST` (anything else is the caller's bug and traps when serialized).
    public var method: String
    public var endpoint: AppleEndpoint
    /// `application/json` (DeviceCheck) or `application/octet-stream` (the base64 receipt);
    /// sent only with a body or a `POST`.
    public var contentType: String
    /// What precedes the JWT in `Authorization` with `.appleJWT`: `Bearer ` for DeviceCheck,
    /// nothing for the fraud-risk endpoint (each as Apple's documentation shows it;
    /// docs/apple-services.md).
    public var authorizationPrefix: String
    public var credential: Credential
    public var body: [UInt8]
    /// The `service` label of the client's metrics; nil = derived from Apple's paths
    /// (`AppleClientMetrics.service(path:)`).
    public var service: String?

    /// A call to Apple: `POST`, the JWT in `Authorization`.
    public init(endpoint: AppleEndpoint, contentType: String, authorizationPrefix: String, body: [UInt8]) {
        self.method = "POST"
        self.endpoint = endpoint
        self.contentType = contentType
        self.authorizationPrefix = authorizationPrefix
        self.credential = .appleJWT
        self.body = body
        self.service = nil
    }

    /// Any other call: `method` (`GET` or `POST`), the credential the host needs, and the
    /// metrics `service` label (a documented label value, e.g. `android_revocation`).
    public init(
        method: String, endpoint: AppleEndpoint, credential: Credential, service: String,
        contentType: String = "application/json", body: [UInt8] = []
    ) {
        precondition(method == "GET" || method == "POST", "the outbound client sends GET or POST")
        self.method = method
        self.endpoint = endpoint
        self.contentType = contentType
        self.authorizationPrefix = ""
        self.credential = credential
        self.body = body
        self.service = service
    }

    /// Whether the client must supply its Apple JWT for this request.
    public var needsAppleJWT: Bool { self.credential == .appleJWT }

    /// The request's bytes: request line, `Host`, `Authorization` (unless `.none`),
    /// `Content-Type` and `Content-Length` (for a `POST` or a body), `Connection: keep-alive`
    /// (the client reuses connections), `Accept: */*`, then the body.
    ///
    /// `jwt` comes from `AppleJWT` (base64url and dots only) and is used only with `.appleJWT`;
    /// a credential with a line break or another control byte is a bug on our side, so it traps
    /// rather than splitting the head.
    public func serialized(jwt: String?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256 + (jwt?.utf8.count ?? 0) + self.body.count)
        func line(_ text: String) {
            out.append(contentsOf: text.utf8)
            out.append(contentsOf: [0x0D, 0x0A])
        }
        line("\(self.method) \(self.endpoint.path) HTTP/1.1")
        line("Host: \(self.endpoint.hostHeader)")
        switch self.credential {
        case .appleJWT:
            let jwt = jwt ?? ""
            precondition(Self.isToken(jwt), "a JWT is printable ASCII without spaces")
            line("Authorization: \(self.authorizationPrefix)\(jwt)")
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
