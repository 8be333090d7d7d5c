package import GatewayIO
package import Verification

/// One HTTPS `POST` to one of Google's endpoints, as `PlayIntegrityStandardDecoder` asks it
/// of the outbound client.
package struct PlayIntegrityGoogleCall: Sendable, Hashable {
    package var endpoint: GoogleEndpoint
    /// The request target: the endpoint's path, or an API path under it.
    package var path: String
    /// `Authorization: Bearer <token>`; nil = none (the token endpoint).
    package var bearer: String?
    package var contentType: String
    package var body: [UInt8]
    package var timeout: Duration
    /// The outbound client's metrics label (`play_integrity_token`, `play_integrity_decode`).
    package var service: String
    /// PEM of the CAs to verify Google's certificate with (`play_integrity.ca_file`); nil = the
    /// system's roots.
    package var caFile: String?

    package init(
        endpoint: GoogleEndpoint, path: String, bearer: String?, contentType: String, body: [UInt8], timeout: Duration,
        service: String, caFile: String? = nil
    ) {
        self.caFile = caFile
        self.endpoint = endpoint
        self.path = path
        self.bearer = bearer
        self.contentType = contentType
        self.body = body
        self.timeout = timeout
        self.service = service
    }
}

/// What the outbound client made of a call.
package enum PlayIntegrityGoogleReply: Sendable, Hashable {
    /// Google answered (any status).
    case answered(status: Int, body: [UInt8], retryAfter: Duration?)
    /// No answer: the breaker is open (nothing was sent).
    case breakerOpen
    /// No answer: connect, TLS, timeout, a broken connection.
    case failed(String)
}

/// The outbound HTTPS client, as the standard decoder sees it: the gateway's (GatewayServe
/// adapts the shared outbound client, with its breaker and per-loop connections); unit tests
/// give a scripted one. `completion` runs on `loop`.
package protocol PlayIntegrityGoogleTransport: Sendable {
    func post(
        _ call: PlayIntegrityGoogleCall, on loop: EventLoop,
        completion: @escaping @Sendable (PlayIntegrityGoogleReply) -> Void)
}
