package import GatewayIO

/// Why the TLS handshake with an `https://` upstream failed, as the proxy answers and counts
/// it: the three certificate problems an operator meets most (each a 502 with its own code,
/// so a client report names it without log access), and everything else under
/// `upstream_tls_error`. `reason` is the stable label for the log line and
/// `attest_gateway_upstream_tls_failures_total{upstream,reason}`.
package enum UpstreamTLSFailure: Sendable, Hashable {
    /// The certificate (or one in its chain) is past its notAfter.
    case certificateExpired
    /// The certificate does not name the host the gateway connected to.
    case hostnameMismatch
    /// The chain does not lead to a trusted CA (`ca_file`, else the system store).
    case unknownCertificateAuthority
    /// The certificate was refused for another reason (`TLSVerificationFailure.code`:
    /// `certificate_not_yet_valid`, `verify_error_<n>`).
    case verification(code: String)
    /// No certificate verdict: a protocol, version or cipher mismatch, an alert from the
    /// upstream (it refused our client certificate), a reset, a server that is not TLS.
    case handshake

    /// From the transport's verification verdict; nil when the handshake failed otherwise.
    package init(_ verification: TLSVerificationFailure?) {
        switch verification {
        case .expiredCertificate: self = .certificateExpired
        case .hostnameMismatch: self = .hostnameMismatch
        case .unknownCertificateAuthority: self = .unknownCertificateAuthority
        case .some(let other): self = .verification(code: other.code)
        case nil: self = .handshake
        }
    }

    /// The metric label and log field: `expired_certificate`, `hostname_mismatch`,
    /// `unknown_ca`, `certificate_not_yet_valid`, `verify_error_<n>`, `handshake`.
    package var reason: String {
        switch self {
        case .certificateExpired: "expired_certificate"
        case .hostnameMismatch: "hostname_mismatch"
        case .unknownCertificateAuthority: "unknown_ca"
        case .verification(let code): code
        case .handshake: "handshake"
        }
    }

    /// The client's 502.
    package var error: ProxyError {
        switch self {
        case .certificateExpired: .upstreamTLSCertificateExpired
        case .hostnameMismatch: .upstreamTLSHostnameMismatch
        case .unknownCertificateAuthority: .upstreamTLSUnknownCA
        case .verification, .handshake: .upstreamTLSError
        }
    }
}
