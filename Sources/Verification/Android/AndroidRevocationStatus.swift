/// One entry of the revocation status list: why Google listed a certificate.
package struct AndroidRevocationStatus: Sendable, Equatable {
    /// "REVOKED" or "SUSPENDED" in Google's schema; kept as sent, since any listed serial is
    /// refused whatever its status says.
    package let status: String
    /// e.g. "KEY_COMPROMISE"; absent in some entries.
    package let reason: String?
}
