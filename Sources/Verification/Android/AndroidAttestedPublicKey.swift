/// The attested key: the leaf certificate's public key.
package struct AndroidAttestedPublicKey: Sendable, Equatable {
    /// DER SubjectPublicKeyInfo, whatever the algorithm (RSA, EC, ML-DSA, ...).
    package let subjectPublicKeyInfo: [UInt8]
    /// The uncompressed X9.62 point when the key is EC P-256 (what `ECPublicKey` takes).
    package let p256Point: [UInt8]?
}
