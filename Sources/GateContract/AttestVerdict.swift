/// The verdict label of one request, for metrics (`attest_gateway_requests_total{verdict}`)
/// and the access log. Stable: dashboards and alerts are built on these strings.
package enum AttestVerdict: String, Sendable, Hashable, CaseIterable {
    /// Assertion valid, counter advanced, challenge consumed when required.
    case verified
    /// `mode: off` route, or an endpoint / unrouted request (nothing to verify).
    case skipped
    /// `X-App-Attest-Key-Id` / `X-App-Assertion` (or a required challenge) absent.
    case missing
    /// Present but undecodable: bad base64, bad CBOR, bad authenticator data, oversized body.
    /// Also the proxy's label for a request head or body it cannot parse.
    case malformed
    case invalidSignature = "invalid_signature"
    /// The assertion's counter is not above the stored one: a replay (or reordering).
    case counterReplay = "counter_replay"
    case unknownKey = "unknown_key"
    case revokedKey = "revoked_key"
    /// The challenge is unknown, already used or expired.
    case challengeInvalid = "challenge_invalid"
    /// The store failed (timeout, disconnected, overloaded).
    case storeError = "store_error"
    /// The key's App ID is not (or no longer) one the policy accepts.
    case appIDMismatch = "app_id_mismatch"
    /// A development key under `environment: production` (or the reverse).
    case environmentMismatch = "environment_mismatch"
    /// A fault on the gateway's side (OpenSSL allocation failure, corrupt key record).
    case internalError = "internal_error"
    /// Refused by a per-address limit (challenge rate, buffered bytes, connections).
    case rateLimited = "rate_limited"
    /// The launch validation category or bundle version is not admitted by `app_validation`,
    /// or the category differs from the attestation's.
    case launchValidationRefused = "launch_validation_refused"
    /// Admitted by a debug token (`allow_debug_tokens: true`), not by App Attest.
    case debug
    /// A debug token that is unknown, expired or revoked, or sent where none is allowed.
    case debugTokenInvalid = "debug_token_invalid"
    /// Admitted by a gateway DeviceCheck token (`fallback: devicecheck`): lower assurance
    /// than `verified` (a genuine device, not a proven app instance).
    case deviceCheck = "devicecheck"
    /// A DeviceCheck token or exchange refused (invalid, expired, not allowed, blocked bit).
    case deviceCheckRefused = "devicecheck_refused"
    /// Apple's DeviceCheck servers could not be asked during an exchange.
    case appleUnavailable = "apple_unavailable"
    /// The key's fraud-risk metric is above `max_risk_metric` on an `action: deny` route.
    case riskMetricExceeded = "risk_metric_exceeded"
    /// Admitted by an attestation token (`accept_token:`): an earlier assertion, not this request's.
    case token
    /// An attestation token refused (malformed, forged, expired, another audience, replayed).
    case tokenRefused = "token_refused"

    // MARK: Access-log labels of the proxy layer (no gate decides these)

    /// Refused by the proxy itself before the gate decided: a body over the route's cap, the
    /// buffered-body budget exhausted.
    case rejected
    /// No route matched on a listener without enforcement (`PassthroughGate`).
    case noRoute = "no_route"
    /// Answered by the admin listener.
    case admin

    /// The verdicts a gate decides, in declaration order: `attest_gateway_requests_total` has
    /// one series per route for each. The proxy-layer labels are left out, so that
    /// `/metrics` carries no series that can only stay at 0.
    package static let gateVerdicts: [AttestVerdict] = allCases.filter { !$0.isProxyLabel }

    /// True for the labels only the proxy layer writes to the access log.
    package var isProxyLabel: Bool {
        switch self {
        case .rejected, .noRoute, .admin: return true
        default: return false
        }
    }
}
