/// An App Attest assertion object, decoded but not yet verified.
///
/// CBOR map: `signature` (DER ECDSA), `authenticatorData` (rpIdHash | flags | signCount
/// [| extensions map]).
public struct AssertionObject: Sendable, Hashable {
    /// A DER ECDSA P-256 signature is at most 72 bytes; leave room, refuse nonsense.
    public static let maxSignatureByteCount = 256

    public var signature: [UInt8]
    public var authenticatorData: AuthenticatorData

    /// - Throws: `malformed_assertion` for a bad structure, `malformed_authenticator_data`
    ///   for bad authenticator data.
    public init(_ bytes: [UInt8]) throws(VerificationError) {
        let top = try CBORDecoder().decodeMap(bytes, object: "assertion object", code: .malformedAssertion)
        guard let signature = top[textKey: "signature"]?.byteStringValue else {
            throw VerificationError(.malformedAssertion, "assertion object has no byte string field signature")
        }
        guard !signature.isEmpty, signature.count <= Self.maxSignatureByteCount else {
            throw VerificationError(.malformedAssertion, "assertion signature is \(signature.count) bytes")
        }
        guard let authData = top[textKey: "authenticatorData"]?.byteStringValue else {
            throw VerificationError(.malformedAssertion, "assertion object has no byte string field authenticatorData")
        }
        self.signature = signature
        self.authenticatorData = try AuthenticatorData(authData, context: .assertion)
    }
}
