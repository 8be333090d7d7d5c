/// What ties a Play Integrity token to one enrollment: the classic `nonce` the gateway derives
/// from its challenge and the attested key, or a standard request's `requestHash`.
public enum PlayIntegrityBinding: Sendable, Hashable {
    /// Classic requests: `requestDetails.nonce` must be this text (`classicNonce`). A trailing
    /// `=` padding the app's encoder may add is accepted.
    case nonce(String)
    /// Standard requests: `requestDetails.requestHash` must be exactly this text.
    case requestHash(String)

    /// The classic nonce of an enrollment (docs/protocol.md, "Play Integrity"):
    /// `base64url(SHA-256(challenge || SHA-256(spki)))` without padding, 43 characters, where
    /// `challenge` is the UTF-8 text of the gateway's challenge exactly as issued and `spki` the
    /// DER SubjectPublicKeyInfo of the key being enrolled (the attested leaf certificate's key).
    /// A token minted for another challenge or another key carries another nonce.
    public static func classicNonce(challenge: [UInt8], attestedKeySPKI spki: [UInt8]) -> String {
        Base64URL.encode(SHA256.hash(challenge, SHA256.hash(spki)))
    }

    /// The binding for `classicNonce(challenge:attestedKeySPKI:)`.
    public static func enrollment(challenge: [UInt8], attestedKeySPKI spki: [UInt8]) -> PlayIntegrityBinding {
        .nonce(Self.classicNonce(challenge: challenge, attestedKeySPKI: spki))
    }

    /// The `requestHash` of a standard request at enrollment: the same value as the classic
    /// nonce (`classicNonce`), so that one binding of challenge and key serves both modes
    /// (43 characters, well under Google's 500-character limit on `requestHash`).
    public static func standardRequestHash(challenge: [UInt8], attestedKeySPKI spki: [UInt8]) -> String {
        Self.classicNonce(challenge: challenge, attestedKeySPKI: spki)
    }

    /// The binding for `standardRequestHash(challenge:attestedKeySPKI:)`.
    public static func standardEnrollment(challenge: [UInt8], attestedKeySPKI spki: [UInt8]) -> PlayIntegrityBinding {
        .requestHash(Self.standardRequestHash(challenge: challenge, attestedKeySPKI: spki))
    }
}
