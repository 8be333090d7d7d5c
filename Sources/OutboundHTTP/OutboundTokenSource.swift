/// Where the outbound client gets the token of a request sent with
/// `OutboundHTTPRequest.Credential.clientToken` (Apple's JWT cache): shared by every loop,
/// asked on the loop for each such request, told when the peer refused it (401).
public protocol OutboundTokenSource: Sendable {
    /// The current token (printable ASCII without spaces); signs a new one when due.
    func currentToken() throws(OutboundHTTPError) -> String
    /// The peer refused the token: the next call signs a new one.
    func invalidate()
}
