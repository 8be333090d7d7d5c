/// One HTTP/1.1 request to Apple, as a value, and its bytes on the wire.
///
/// Both of Apple's services take `POST` with a small body and a JWT in `Authorization`.
/// The JWT is not part of the value: it is cached and re-signed on its own clock
/// (`AppleJWTCache`), so the same request can be retried with a newer token.
public struct AppleHTTPRequest: Sendable, Hashable {
    public var endpoint: AppleEndpoint
    /// `application/json` (DeviceCheck) or `application/octet-stream` (the base64 receipt).
    public var contentType: String
    /// What precedes the JWT in `Authorization`: `Bearer ` for DeviceCheck, nothing for the
    /// fraud-risk endpoint (each as Apple's documentation shows it; docs/apple-services.md).
    public var authorizationPrefix: String
    public var body: [UInt8]

    public init(endpoint: AppleEndpoint, contentType: String, authorizationPrefix: String, body: [UInt8]) {
        self.endpoint = endpoint
        self.contentType = contentType
        self.authorizationPrefix = authorizationPrefix
        self.body = body
    }

    /// The request's bytes: request line, `Host`, `Authorization`, `Content-Type`,
    /// `Content-Length`, `Connection: keep-alive` (the client reuses connections to Apple),
    /// `Accept: */*`, then the body.
    ///
    /// `jwt` comes from `AppleJWT` (base64url and dots only); a value with a line break or
    /// another control byte is a bug on our side, so it traps rather than splitting the head.
    public func serialized(jwt: String) -> [UInt8] {
        precondition(
            jwt.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "a JWT is printable ASCII without spaces")
        var out: [UInt8] = []
        out.reserveCapacity(256 + jwt.utf8.count + self.body.count)
        func line(_ text: String) {
            out.append(contentsOf: text.utf8)
            out.append(contentsOf: [0x0D, 0x0A])
        }
        line("POST \(self.endpoint.path) HTTP/1.1")
        line("Host: \(self.endpoint.hostHeader)")
        line("Authorization: \(self.authorizationPrefix)\(jwt)")
        line("Content-Type: \(self.contentType)")
        line("Content-Length: \(self.body.count)")
        line("Connection: keep-alive")
        line("Accept: */*")
        line("")
        out.append(contentsOf: self.body)
        return out
    }
}
