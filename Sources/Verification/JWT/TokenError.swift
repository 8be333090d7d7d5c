/// The one error type of the gateway's attestation tokens (ES256 JWTs): decoding, signature and
/// claim checks.
///
/// `code` is stable: the gateway puts it in JSON refusals and metrics, and docs/protocol.md
/// lists each one. `reason` says what was checked; it never repeats token bytes. Equality
/// compares `code` only, so tests assert on codes.
public struct TokenError: StableCodedError {
    public struct Code: StableErrorCode {
        public let rawValue: String
        private init(_ rawValue: String) { self.rawValue = rawValue }

        /// Not three strict base64url parts of JSON objects, over the size cap, or a claim of
        /// the wrong type or missing.
        public static let malformed = Code("token_malformed")
        /// `alg` is not `ES256` (`none`, `HS256`, ...), or the header asks for extensions (`crit`).
        public static let algorithmRefused = Code("token_algorithm_refused")
        /// `kid` is absent or names none of the gateway's token keys.
        public static let unknownKey = Code("token_unknown_key")
        /// The ES256 signature does not verify under the key `kid` names.
        public static let signatureInvalid = Code("token_signature_invalid")
        /// `exp` has passed (beyond the allowed clock skew).
        public static let expired = Code("token_expired")
        /// `nbf` or `iat` lies in the future (beyond the allowed clock skew).
        public static let notYetValid = Code("token_not_yet_valid")
        /// `exp - iat` is longer than any TTL the policy issues.
        public static let lifetimeTooLong = Code("token_lifetime_too_long")
        /// `aud` does not name the audience asked for.
        public static let audienceMismatch = Code("token_audience_mismatch")
        /// `iss` is not the gateway's issuer.
        public static let issuerMismatch = Code("token_issuer_mismatch")
        /// OpenSSL failed while signing: the gateway's fault, not the token's.
        public static let internalCryptoError = Code("internal_crypto_error")
    }

    public let code: Code
    public let reason: String
    public let file: String
    public let line: Int

    public init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }
}
