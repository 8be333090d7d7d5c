/// What a verified Android Key Attestation chain proves.
///
/// The challenge, the package names and signature digests, and boot-state policy are the
/// caller's to check: the values are in `keyDescription`.
package struct AndroidAttestationResult: Sendable {
    /// The leaf's KeyDescription.
    package let keyDescription: AndroidKeyDescription
    package let leafPublicKey: AndroidAttestedPublicKey
    /// The KeyDescriptions of the ATTEST_KEY certificates above the leaf, nearest first.
    package let attestKeyDescriptions: [AndroidKeyDescription]
    /// True when the chain ends in one of Google's pinned root keys, false when in an extra anchor.
    package let isGoogleRoot: Bool
    package let chainLength: Int
}
