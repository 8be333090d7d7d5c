import Foundation

/// The JWS inside a decrypted Play Integrity token (RFC 7515 compact serialization), split and
/// checked: three strict base64url parts, a header whose `alg` is exactly `ES256` without
/// `crit` (`JOSEHeader` refuses it), a 64-byte `r ‖ s` signature. `verify` checks the
/// signature with the project's own ES256 verifier (`ECPublicKey`, OpenSSL), the same one that
/// checks the gateway's attestation tokens.
public struct PlayIntegrityJWS: Sendable, Hashable {
    /// `ASCII(header part) || '.' || ASCII(payload part)`.
    public let signingInput: [UInt8]
    /// The decoded payload: Google's verdict JSON, not yet trusted.
    public let payload: [UInt8]
    public let signature: [UInt8]

    /// `bytes` is the JWE's plaintext, itself bounded by `PlayIntegrityJWE.maximumBytes`.
    public init(utf8 bytes: [UInt8]) throws(PlayIntegrityError) {
        let parts: [ArraySlice<UInt8>]
        do throws(JOSECompact.SplitFailure) {
            parts = try JOSECompact.split(bytes, count: 3, maximumBytes: PlayIntegrityJWE.maximumBytes)
        } catch {
            switch error {
            case .tooLong:
                throw PlayIntegrityError(
                    .badFormat, "inner JWS of \(bytes.count) bytes exceeds \(PlayIntegrityJWE.maximumBytes)")
            case .partCount(let found):
                throw PlayIntegrityError(.badFormat, "the inner JWS has three parts separated by '.', found \(found)")
            }
        }
        guard let headerBytes = JOSECompact.nonEmptyPart(parts[0]) else {
            throw PlayIntegrityError(.badFormat, "the inner JWS's header is empty or not unpadded base64url")
        }
        guard let payload = JOSECompact.nonEmptyPart(parts[1]) else {
            throw PlayIntegrityError(.badFormat, "the inner JWS's payload is empty or not unpadded base64url")
        }
        guard let signature = Base64URL.decode(parts[2]) else {
            throw PlayIntegrityError(.badFormat, "the inner JWS's signature is not unpadded base64url")
        }
        let header: JOSEHeader
        do throws(JOSECompact.ObjectFailure) {
            header = try JOSECompact.object(JOSEHeader.self, from: headerBytes)
        } catch {
            switch error {
            case .notAnObject:
                throw PlayIntegrityError(.badFormat, "the inner JWS's header is not a JSON object")
            case .criticalExtensions:
                throw PlayIntegrityError(
                    .unsupportedAlgorithm, "the inner JWS's header lists critical extensions (crit)")
            case .notTheExpectedObject:
                throw PlayIntegrityError(.badFormat, "the inner JWS's header is not a JSON object with a string alg")
            }
        }
        guard header.alg == JOSEHeader.es256 else {
            throw PlayIntegrityError(
                .unsupportedAlgorithm,
                "JWS alg \(PlayIntegrityError.printable(header.alg)) is refused; Play Integrity signs with ES256")
        }
        guard signature.count == 2 * ECDSASignatureEncoding.scalarByteCount else {
            throw PlayIntegrityError(
                .signatureInvalid, "the ES256 signature is \(signature.count) bytes, not the 64 of r ‖ s")
        }
        self.signingInput = Array(bytes[..<parts[1].endIndex])
        self.payload = payload
        self.signature = signature
    }

    /// The index of the first of `keys` the signature verifies under.
    public func verify(with keys: [PlayIntegrityVerificationKey]) throws(PlayIntegrityError) -> Int {
        guard let der = ECDSASignatureEncoding.der(fromRS: self.signature) else {
            throw PlayIntegrityError(.signatureInvalid, "the ES256 signature's r or s is not a valid scalar")
        }
        for (index, key) in keys.enumerated() where key.key.isValidSignature(der, for: self.signingInput) {
            return index
        }
        throw PlayIntegrityError(
            .signatureInvalid,
            "the ES256 signature verifies under none of the \(keys.count) verification key(s) (\(keys.map { PlayIntegrityError.printable($0.name) }.joined(separator: ", ")))"
        )
    }
}
