/// An App Attest attestation object, decoded but not yet verified.
///
/// CBOR map: `fmt` = "apple-appattest", `attStmt` = {`x5c`: [credCert, intermediate, ...],
/// `receipt`: bytes}, `authData`: bytes.
public struct AttestationObject: Sendable, Hashable {
    public static let appleFormat = "apple-appattest"
    /// More certificates than any real chain has (Apple sends 2).
    public static let maxCertificateCount = 8

    public var format: String
    /// DER certificates, leaf (credential certificate) first.
    public var certificates: [[UInt8]]
    public var receipt: [UInt8]
    public var authenticatorData: AuthenticatorData

    /// - Throws: `malformed_attestation` for a bad structure, `unsupported_format` when
    ///   `fmt` is not "apple-appattest", `malformed_authenticator_data` for bad authData.
    public init(_ bytes: [UInt8]) throws(VerificationError) {
        let top = try CBORDecoder().decodeMap(bytes, object: "attestation object", code: .malformedAttestation)
        guard let format = top[textKey: "fmt"]?.textStringValue else {
            throw VerificationError(.malformedAttestation, "attestation object has no text field fmt")
        }
        guard format == Self.appleFormat else {
            throw VerificationError(
                .unsupportedFormat, "attestation format is \"\(format.prefix(64))\", expected \"\(Self.appleFormat)\"")
        }
        guard let statement = top[textKey: "attStmt"], case .map = statement else {
            throw VerificationError(.malformedAttestation, "attestation object has no map field attStmt")
        }
        guard let chain = statement[textKey: "x5c"]?.arrayValue else {
            throw VerificationError(.malformedAttestation, "attStmt has no array field x5c")
        }
        guard !chain.isEmpty, chain.count <= Self.maxCertificateCount else {
            throw VerificationError(
                .malformedAttestation,
                "attStmt.x5c holds \(chain.count) certificates, expected 1 to \(Self.maxCertificateCount)")
        }
        var certificates: [[UInt8]] = []
        for (index, item) in chain.enumerated() {
            guard let der = item.byteStringValue else {
                throw VerificationError(
                    .malformedAttestation, "attStmt.x5c[\(index)] is a \(item.kindName), not a byte string")
            }
            certificates.append(der)
        }
        guard let receipt = statement[textKey: "receipt"]?.byteStringValue else {
            throw VerificationError(.malformedAttestation, "attStmt has no byte string field receipt")
        }
        guard let authData = top[textKey: "authData"]?.byteStringValue else {
            throw VerificationError(.malformedAttestation, "attestation object has no byte string field authData")
        }
        self.format = format
        self.certificates = certificates
        self.receipt = receipt
        self.authenticatorData = try AuthenticatorData(authData, context: .attestation)
    }
}
