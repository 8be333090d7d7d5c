import GateContract
import HTTP1

/// Decoding the credential headers from the head alone, so `AttestGate.classify` refuses a
/// request that cannot verify before any of its body is buffered.
extension AssertionCredentials {
    /// Why a protected request's credentials cannot verify, with the key ID when known.
    struct Failure: Error {
        var error: EnforcementError
        var keyID: String?
    }

    /// The credential headers of `head`, decoded, or why they cannot verify.
    static func decode(_ head: HTTPRequestHead) -> Result<AssertionCredentials, Failure> {
        // One pass over the fields for the three names (the first value of each, and whether
        // one came twice), instead of a lookup and a count per name.
        var keyIDText: String? = nil
        var assertionText: String? = nil
        var counts = (keyID: 0, assertion: 0, challenge: 0)
        let fields = head.headers.fields
        for index in fields.indices {
            let name = fields[index].name
            if name.caseInsensitiveEquals(IdentityHeaders.keyID) {
                counts.keyID += 1
                if keyIDText == nil { keyIDText = fields[index].value }
            } else if name.caseInsensitiveEquals(IdentityHeaders.assertion) {
                counts.assertion += 1
                if assertionText == nil { assertionText = fields[index].value }
            } else if name.caseInsensitiveEquals(IdentityHeaders.challenge) {
                counts.challenge += 1
            }
        }
        guard let keyIDText, let assertionText else {
            let error = EnforcementError(
                .assertionMissing, "\(IdentityHeaders.keyID) and \(IdentityHeaders.assertion) are required")
            return .failure(Failure(error: error))
        }
        // One value each: with two, which one the gateway checked would be ambiguous.
        let repeated =
            counts.keyID > 1
            ? IdentityHeaders.keyID
            : counts.assertion > 1 ? IdentityHeaders.assertion : counts.challenge > 1 ? IdentityHeaders.challenge : nil
        if let name = repeated {
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
