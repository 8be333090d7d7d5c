/// The gateway's own endpoints on a main listener (`endpoints:` in the policy): answered by
/// the gate, never forwarded. `classify` names one; `decide` dispatches on it.
package enum GateEndpoint: Sendable, Hashable, CaseIterable {
    case policy
    /// Apps report their own attestation failures (`POST`, anonymous, counted only).
    case report
    case challenge
    case attest
    case deviceCheck
    /// The attestation token exchange (`POST`, `tokens:`).
    case token
    /// `GET /.well-known/jwks.json` (`tokens:`).
    case tokenKeys
    /// `GET /.well-known/openid-configuration` (`tokens:`).
    case tokenDiscovery

    /// The name metrics and logs use for requests to it (routes are named by the policy).
    package var routeLabel: String {
        switch self {
        case .policy: "_policy"
        case .report: "_report"
        case .challenge: "_challenge"
        case .attest: "_attest"
        case .deviceCheck: "_devicecheck"
        case .token: "_token"
        case .tokenKeys: "_jwks"
        case .tokenDiscovery: "_openid_configuration"
        }
    }
}
