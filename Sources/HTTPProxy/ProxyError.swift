package import GateContract
import HTTP1

/// Why the proxy itself answered, not the gate: a body it would not hold, a client or an
/// upstream too slow, an upstream that failed. The one table from code to HTTP status (as
/// `EnforcementError` is for the gate's refusals); codes are part of the client protocol
/// (docs/protocol.md) and never change meaning. Equality compares code and message.
package struct ProxyError: Error, Sendable, Hashable, CustomStringConvertible {
    package enum Code: String, Sendable, Hashable, CaseIterable {
        /// The request body is over the route's `max_body_bytes`.
        case bodyTooLarge = "body_too_large"
        /// The process-wide budget for buffered bodies is used up.
        case bodyBudgetExhausted = "body_budget_exhausted"
        /// The client did not send its head or body in time.
        case requestTimeout = "request_timeout"
        /// The upstream refused, reset or closed before a complete response.
        case upstreamUnavailable = "upstream_unavailable"
        /// The upstream did not accept a connection or answer in time.
        case upstreamTimeout = "upstream_timeout"
        /// The upstream's answer is not HTTP/1.1.
        case upstreamInvalidResponse = "upstream_invalid_response"
        /// Too many requests wait for a connection to the upstream.
        case upstreamBusy = "upstream_busy"
        /// A trusted proxy sent forwarding fields that say two things (`ForwardedHeaders.refusal`).
        case invalidForwardedHeader = "invalid_forwarded_header"
        /// The check-only listener (`authz_listen`) was asked by a peer outside `trusted_proxies`.
        case authzUntrustedPeer = "authz_untrusted_peer"
        /// The TLS handshake with an `https://` upstream failed for a reason without a code of
        /// its own (protocol or cipher mismatch, an alert, a server that does not speak TLS, a
        /// certificate refused for another reason); the reason is in the log.
        case upstreamTLSError = "upstream_tls_error"
        /// The upstream's certificate (or one in its chain) is past its notAfter.
        case upstreamTLSCertificateExpired = "upstream_tls_certificate_expired"
        /// The upstream's certificate does not name the host (`server_name`, else the URL's host).
        case upstreamTLSHostnameMismatch = "upstream_tls_hostname_mismatch"
        /// The upstream's chain does not lead to a CA in its `ca_file` (or the system store).
        case upstreamTLSUnknownCA = "upstream_tls_unknown_ca"
        /// The client address holds its share of the buffered-body budget
        /// (`limits.max_buffered_body_bytes_per_address`).
        case rateLimited = "rate_limited"
        /// A WebSocket upgrade on a `websocket: true` route breaks RFC 6455 §4.1 (not a GET, not
        /// HTTP/1.1, a body, a missing or malformed `Sec-WebSocket-Key`).
        case websocketUpgradeInvalid = "websocket_upgrade_invalid"
        /// A WebSocket upgrade whose `Sec-WebSocket-Version` is not 13 (answered with
        /// `Sec-WebSocket-Version: 13`, RFC 6455 §4.2.2).
        case websocketVersionUnsupported = "websocket_version_unsupported"

        package var status: Int {
            switch self {
            case .bodyTooLarge: 413
            case .rateLimited: 429
            case .bodyBudgetExhausted: 503
            case .requestTimeout: 408
            case .upstreamUnavailable: 502
            case .upstreamTimeout: 504
            case .upstreamInvalidResponse: 502
            case .upstreamBusy: 503
            case .invalidForwardedHeader, .websocketUpgradeInvalid: 400
            case .websocketVersionUnsupported: 426
            case .authzUntrustedPeer: 403
            case .upstreamTLSError, .upstreamTLSCertificateExpired, .upstreamTLSHostnameMismatch,
                .upstreamTLSUnknownCA:
                502
            }
        }

        /// Seconds after which a retry may succeed (the condition is the gateway's, not the request's).
        package var retryAfterSeconds: Int? {
            switch self {
            case .bodyBudgetExhausted, .rateLimited: 1
            case .bodyTooLarge, .requestTimeout, .upstreamUnavailable, .upstreamTimeout, .upstreamInvalidResponse,
                .upstreamBusy, .invalidForwardedHeader, .authzUntrustedPeer, .upstreamTLSError,
                .upstreamTLSCertificateExpired,
                .upstreamTLSHostnameMismatch, .upstreamTLSUnknownCA, .websocketUpgradeInvalid,
                .websocketVersionUnsupported:
                nil
            }
        }
    }

    package var code: Code
    /// What was checked and what differed, for the client and the log.
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var status: Int { self.code.status }

    package var description: String { "\(self.code.rawValue): \(self.message)" }

    /// The JSON error answer (`{"error": code, "message": …}`), with `Retry-After` where a retry helps.
    package var response: LocalResponse {
        var response = LocalResponse.jsonError(status: self.status, code: self.code.rawValue, message: self.message)
        if let seconds = self.code.retryAfterSeconds {
            response.headers.add(name: "Retry-After", value: String(seconds))
        }
        if self.code == .websocketVersionUnsupported {
            response.headers.add(name: "Sec-WebSocket-Version", value: WebSocketUpgrade.version)
        }
        return response
    }

    // MARK: - The proxy's refusals, worded once

    static func bodyTooLarge(declared length: UInt64, cap: Int) -> ProxyError {
        ProxyError(.bodyTooLarge, "request body of \(length) bytes exceeds the route's limit of \(cap) bytes")
    }

    static func bodyTooLarge(cap: Int) -> ProxyError {
        ProxyError(.bodyTooLarge, "request body exceeds the route's limit of \(cap) bytes")
    }

    static func invalidForwardedHeader(_ reason: String) -> ProxyError {
        ProxyError(.invalidForwardedHeader, "the forwarding fields from a trusted proxy are ambiguous: \(reason)")
    }

    static let authzUntrustedPeer = ProxyError(
        .authzUntrustedPeer, "this check-only listener answers only the gateways listed in trusted_proxies")

    static let bodyBudgetExhausted = ProxyError(
        .bodyBudgetExhausted, "the gateway is holding too many request bodies; retry later")
    static let headTimeout = ProxyError(.requestTimeout, "the request head did not arrive in time")
    static let bodyIdleTimeout = ProxyError(.requestTimeout, "the request body did not arrive in time")
    static let bufferedBodyTimeout = ProxyError(
        .requestTimeout, "the request body did not arrive within the time allowed for it")
    static let upstreamUnavailable = ProxyError(.upstreamUnavailable, "the upstream service is not reachable")
    static let upstreamTimeout = ProxyError(.upstreamTimeout, "the upstream service did not answer in time")
    static let upstreamInvalidResponse = ProxyError(
        .upstreamInvalidResponse, "the upstream service sent an invalid response")
    static let upstreamUpgradeMismatch = ProxyError(
        .upstreamInvalidResponse, "the upstream service's 101 does not answer this WebSocket upgrade")
    static let upstreamBusy = ProxyError(.upstreamBusy, "too many requests are waiting for the upstream service")
    static let upstreamTLSError = ProxyError(
        .upstreamTLSError, "the TLS handshake with the upstream service failed")
    static let upstreamTLSCertificateExpired = ProxyError(
        .upstreamTLSCertificateExpired, "the upstream service's TLS certificate has expired")
    static let upstreamTLSHostnameMismatch = ProxyError(
        .upstreamTLSHostnameMismatch, "the upstream service's TLS certificate is not valid for its host name")
    static let upstreamTLSUnknownCA = ProxyError(
        .upstreamTLSUnknownCA, "the upstream service's TLS certificate is not issued by a trusted CA")
}
