package import HTTP1

/// One complete answer to a call of the outbound client: what the services' decoders read
/// (`DeviceCheckAnswer`, `FraudRiskAnswer`, the status list, Google's JSON), plus what the
/// client needs to manage the connection and its backoff.
package struct OutboundHTTPResponse: Sendable {
    package var status: Int
    package var headers: HTTPHeaders
    package var body: [UInt8]
    /// False when the server (or a proxy) asked to close, or the body ran until close.
    package var isKeepAlive: Bool

    package init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8], isKeepAlive: Bool) {
        self.status = status
        self.headers = headers
        self.body = body
        self.isKeepAlive = isKeepAlive
    }

    /// `Retry-After` in delta-seconds (0...86400); an HTTP-date or anything else is nil (the
    /// client's own backoff applies then).
    package var retryAfter: Duration? {
        guard let text = self.headers["Retry-After"], !text.isEmpty, text.utf8.count <= 6,
            text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let seconds = Int(text), seconds <= 86_400
        else { return nil }
        return .seconds(seconds)
    }
}
