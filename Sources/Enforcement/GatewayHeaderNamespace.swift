import GateContract
import HTTP1

/// Every header name in the gateway's namespace (`X-App-Attest-*` and `X-App-Assertion`), each
/// with the role it plays: the one list that inline forwarding, the check-only answer and the
/// proxy configurations in docs/integrations.md are built from or tested against.
///
/// A client may send only the credentials. Copies of the gateway's own identity headers are
/// removed inline and overwritten by the check-only answer; a name in the namespace that is on
/// no list is refused on every door (400 `unknown_gateway_header`), because a proxy asking the
/// check-only listener can overwrite only the names its configuration lists, so such a header
/// would reach the upstream through one door and not through another.
package enum GatewayHeaderNamespace {
    package enum Role: Sendable, Hashable {
        /// Sent by the app; never forwarded (the gateway adds its own identity instead).
        case credential
        /// Sent by the app as a credential and set by the gateway as identity (the key ID).
        case credentialAndIdentity
        /// Set by the gateway for the upstream: a client's copy is removed or overwritten.
        case identity
        /// The check-only listener's answer to the asking proxy (the denial's code).
        case answer
    }

    package struct Entry: Sendable, Hashable {
        package let name: String
        package let role: Role
    }

    package static let entries: [Entry] = [
        Entry(name: IdentityHeaders.keyID, role: .credentialAndIdentity),
        Entry(name: IdentityHeaders.assertion, role: .credential),
        Entry(name: IdentityHeaders.challenge, role: .credential),
        Entry(name: IdentityHeaders.debugToken, role: .credential),
        Entry(name: IdentityHeaders.deviceCheckToken, role: .credential),
        Entry(name: IdentityHeaders.status, role: .identity),
        Entry(name: IdentityHeaders.appID, role: .identity),
        Entry(name: IdentityHeaders.environment, role: .identity),
        Entry(name: IdentityHeaders.counter, role: .identity),
        Entry(name: IdentityHeaders.validationCategory, role: .identity),
        Entry(name: IdentityHeaders.bundleVersion, role: .identity),
        Entry(name: IdentityHeaders.keyAccessPolicy, role: .identity),
        Entry(name: IdentityHeaders.rolloutArm, role: .identity),
        Entry(name: IdentityHeaders.riskMetric, role: .identity),
        Entry(name: IdentityHeaders.riskMetricAge, role: .identity),
        Entry(name: IdentityHeaders.riskExceeded, role: .identity),
        Entry(name: IdentityHeaders.debugTokenName, role: .identity),
        Entry(name: IdentityHeaders.platform, role: .identity),
        Entry(name: IdentityHeaders.playIntegrity, role: .identity),
        Entry(name: IdentitySigner.headerName, role: .identity),
        Entry(name: AuthzAnswer.errorHeader, role: .answer),
    ]

    /// The names a proxy in check-only mode must copy from the answer onto the upstream request,
    /// replacing the client's: the identity headers and the credentials (which the answer
    /// blanks, so that they never reach the upstream as if checked).
    package static let copiedByProxies: [String] = Self.entries.filter { $0.role != .answer }.map(\.name)

    /// True when `name` (any case) is a credential only the app sends, never forwarded.
    package static func isCredential(_ name: String) -> Bool {
        Self.entries.contains { $0.role == .credential && $0.name.caseInsensitiveEquals(name) }
    }

    /// True when `name` (any case) is on the list.
    package static func isKnown(_ name: String) -> Bool {
        Self.entries.contains { $0.name.caseInsensitiveEquals(name) }
    }
}
