public import OutboundHTTP

/// The JWT of Apple's outbound client (`OutboundHTTPRequest.Credential.clientToken`).
extension AppleJWTCache: OutboundTokenSource {
    /// `token()`; a signing failure is `jwtSigningFailed` (`apple_jwt_signing_failed`).
    public func currentToken() throws(OutboundHTTPError) -> String {
        do {
            return try self.token()
        } catch {
            throw OutboundHTTPError(.jwtSigningFailed, peer: .apple, error.reason)
        }
    }
}
