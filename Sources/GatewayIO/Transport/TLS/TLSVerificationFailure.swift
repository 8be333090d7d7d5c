private import COpenSSL

/// Why a peer's certificate was refused (client side: an upstream; server side: an mTLS
/// client), from OpenSSL's verify result. `code` is stable, for the log line next to the
/// proxy's 502 `upstream_tls_error`.
package enum TLSVerificationFailure: Hashable, Sendable, CustomStringConvertible {
    /// The certificate (or one in its chain) is past its notAfter.
    case expiredCertificate
    /// Not yet valid (notBefore in the future): usually a clock or issuance problem.
    case certificateNotYetValid
    /// The certificate does not name the host we connected to.
    case hostnameMismatch
    /// The chain does not lead to a trusted CA (self-signed, private CA not in `ca_file`,
    /// missing intermediate).
    case unknownCertificateAuthority
    /// Anything else OpenSSL's verifier said (its X509_V_ERR code and text).
    case other(code: Int32, text: String)

    /// From an `X509_V_ERR_*` code (not `X509_V_OK`).
    init(verifyResult code: Int) {
        switch Int32(code) {
        case X509_V_ERR_CERT_HAS_EXPIRED: self = .expiredCertificate
        case X509_V_ERR_CERT_NOT_YET_VALID: self = .certificateNotYetValid
        case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH: self = .hostnameMismatch
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
            X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
            X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
            self = .unknownCertificateAuthority
        default:
            self = .other(code: Int32(code), text: String(cString: X509_verify_cert_error_string(code)))
        }
    }

    /// snake_case, stable: `expired_certificate`, `hostname_mismatch`, `unknown_ca`, ...
    package var code: String {
        switch self {
        case .expiredCertificate: "expired_certificate"
        case .certificateNotYetValid: "certificate_not_yet_valid"
        case .hostnameMismatch: "hostname_mismatch"
        case .unknownCertificateAuthority: "unknown_ca"
        case .other(let code, _): "verify_error_\(code)"
        }
    }

    package var description: String {
        switch self {
        case .expiredCertificate: "certificate verification failed: expired_certificate"
        case .certificateNotYetValid: "certificate verification failed: certificate_not_yet_valid"
        case .hostnameMismatch: "certificate verification failed: hostname_mismatch"
        case .unknownCertificateAuthority: "certificate verification failed: unknown_ca"
        case .other(let code, let text): "certificate verification failed: \(text) (X509_V_ERR \(code))"
        }
    }
}
