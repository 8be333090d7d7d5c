import HTTP1

/// The credential headers of a protected request (`X-App-Attest-Key-Id`, `X-App-Assertion`),
/// decoded. Read from the head alone, so `AttestGate.classify` refuses a request that cannot
/// verify before any of its body is buffered, and `ProtectedRequestVerifier` reads them again
/// with the body.
struct AssertionCredentials: Sendable {
    /// Standard base64 of the 32-byte key ID, re-encoded (one spelling per key).
    var keyID: String
    var assertion: [UInt8]

    /// Why a protected request's credentials cannot verify, with the key ID when known.
    struct Failure: Error {
        var error: EnforcementError
        var keyID: String?
    }

    /// The credential headers of `head`, decoded, or why they cannot verify.
    static func decode(_ head: HTTPRequestHead) -> Result<AssertionCredentials, Failure> {
        guard let keyIDText = head.headers[IdentityHeaders.keyID],
            let assertionText = head.headers[IdentityHeaders.assertion]
        else {
            let error = EnforcementError(
                .assertionMissing, "\(IdentityHeaders.keyID) and \(IdentityHeaders.assertion) are required")
            return .failure(Failure(error: error))
        }
        // One value each: with two, which one the gateway checked would be ambiguous.
        for name in [IdentityHeaders.keyID, IdentityHeaders.assertion, IdentityHeaders.challenge]
        where IdentityHeaders.occurrences(of: name, in: head.headers) > 1 {
            let error = EnforcementError(.malformedAssertion, "\(name) appears more than once")
            return .failure(Failure(error: error))
        }
        guard let keyIDBytes = EndpointRequests.decodeBase64(keyIDText), keyIDBytes.count == 32 else {
            let error = EnforcementError(
                .malformedAssertion, "\(IdentityHeaders.keyID) is not the standard base64 of a 32-byte key ID")
            return .failure(Failure(error: error))
        }
        let keyID = EndpointRequests.encodeBase64(keyIDBytes)
        guard let assertion = EndpointRequests.decodeBase64(assertionText) else {
            let error = EnforcementError(.malformedAssertion, "\(IdentityHeaders.assertion) is not standard base64")
            return .failure(Failure(error: error, keyID: keyID))
        }
        return .success(AssertionCredentials(keyID: keyID, assertion: assertion))
    }
}
