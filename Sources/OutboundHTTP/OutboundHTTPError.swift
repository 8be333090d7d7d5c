/// Why a call of the outbound HTTPS client got no answer: the transport's failures (no
/// connection, timeout, TLS, a malformed answer) and the client's own refusals (open breaker,
/// rate limit or full queue, a request it cannot send).
///
/// The error carries the `peer` it talked to, so its stable code names the service:
/// `apple_timeout` for a call to Apple, `google_timeout` for one to Google. Each service maps it
/// to its own error type (`AppleError(_:)` keeps Apple's documented `apple_*` codes); every
/// code is in docs/protocol.md. Equality compares `code` and `peer`.
public struct OutboundHTTPError: Error, Hashable, CustomStringConvertible, Sendable {
    /// The failure, without the service (`stableCode` adds it).
    public enum Code: String, Sendable, Hashable, CaseIterable {
        /// No answer: resolve, connect, TLS or read failed, the peer closed without an answer,
        /// the gateway is shutting down, or the breaker is open (`isBreakerOpen`).
        case unreachable
        /// The call did not finish within its timeout (queueing, connect, handshake, answer).
        case timedOut = "timeout"
        /// The TLS handshake failed (certificate not verified against the trust store or the
        /// `ca_file`, or a broken handshake).
        case tlsFailed = "tls_failed"
        /// An answer that is not valid HTTP/1.1, truncated, or with a body over the client's bound.
        case malformedAnswer = "malformed_answer"
        /// The gateway's own limit: the client's rate limit is spent, or too many calls are
        /// queued for the host.
        case throttled
        /// A request the client cannot send (it needs a token and the client has no token source).
        case invalidRequest = "invalid_request"
        /// The client's token source could not sign its token (Apple's JWT).
        case jwtSigningFailed = "jwt_signing_failed"
    }

    public let code: Code
    public let peer: OutboundPeer
    /// The HTTP status when the answer came but could not be read whole.
    public let status: Int?
    public let reason: String
    /// The client refused the call because its breaker is open (`code` is `.unreachable`).
    public let isBreakerOpen: Bool

    public init(_ code: Code, peer: OutboundPeer, status: Int? = nil, _ reason: String, isBreakerOpen: Bool = false) {
        self.code = code
        self.peer = peer
        self.status = status
        self.reason = reason
        self.isBreakerOpen = isBreakerOpen
    }

    /// `<peer>_<code>`: `apple_unreachable`, `google_timeout`, … (docs/protocol.md).
    public var stableCode: String { "\(self.peer.name)_\(self.code.rawValue)" }

    public static func == (lhs: OutboundHTTPError, rhs: OutboundHTTPError) -> Bool {
        lhs.code == rhs.code && lhs.peer == rhs.peer
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.code)
        hasher.combine(self.peer)
    }

    public var description: String {
        let status = self.status.map { " [\($0)]" } ?? ""
        return "\(self.stableCode)\(status): \(self.reason)"
    }
}
