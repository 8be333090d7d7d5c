/// The one error type of Play Integrity classic tokens: the JWE and JWS envelopes, the keys,
/// the payload, and each verdict the policy asks for.
///
/// `code` is stable: the gateway puts it in JSON refusals and metrics, and docs/protocol.md
/// ("Play Integrity") lists each one. `reason` says what was checked and what differed; it
/// never repeats token bytes beyond a short printable excerpt. Equality compares `code` only,
/// so tests assert on codes.
public struct PlayIntegrityError: StableCodedError {
    public struct Code: StableErrorCode {
        public let rawValue: String
        private init(_ rawValue: String) { self.rawValue = rawValue }

        /// Not a compact JWE of five strict base64url parts within the size cap, a part of the
        /// wrong length, a header that is not a JSON object, or an inner JWS that is not three
        /// strict base64url parts.
        public static let badFormat = Code("play_integrity_bad_format")
        /// The JWE header is not exactly `alg: A256KW`, `enc: A256GCM` without `zip`, or the JWS
        /// header is not exactly `alg: ES256`; either lists critical extensions (`crit`).
        public static let unsupportedAlgorithm = Code("play_integrity_unsupported_algorithm")
        /// No configured decryption key unwraps the content key and authenticates the content.
        public static let decryptionFailed = Code("play_integrity_decryption_failed")
        /// The ES256 signature verifies under none of the configured verification keys.
        public static let signatureInvalid = Code("play_integrity_signature_invalid")
        /// The signed payload is not the JSON Google documents (a field missing or mistyped).
        public static let payloadMalformed = Code("play_integrity_payload_malformed")
        /// `requestDetails.nonce` is not the nonce derived from the challenge and the key.
        public static let nonceMismatch = Code("play_integrity_nonce_mismatch")
        /// `requestDetails.requestHash` is not the request hash expected.
        public static let requestHashMismatch = Code("play_integrity_request_hash_mismatch")
        /// `requestDetails.timestampMillis` is older than the policy's maximum age, or later
        /// than now beyond the allowed clock skew.
        public static let stale = Code("play_integrity_stale")
        /// `requestDetails.requestPackageName` or `appIntegrity.packageName` is not the app's.
        public static let packageMismatch = Code("play_integrity_package_mismatch")
        /// None of `appIntegrity.certificateSha256Digest` is a configured signing digest.
        public static let certificateMismatch = Code("play_integrity_certificate_mismatch")
        /// `appIntegrity.appRecognitionVerdict` is not `PLAY_RECOGNIZED`.
        public static let appNotRecognized = Code("play_integrity_app_not_recognized")
        /// `deviceIntegrity.deviceRecognitionVerdict` lacks the label the policy requires.
        public static let deviceIntegrityInsufficient = Code("play_integrity_device_integrity_insufficient")
        /// `accountDetails.appLicensingVerdict` is not `LICENSED` and the policy requires it.
        public static let notLicensed = Code("play_integrity_not_licensed")
        /// `recentDeviceActivity.deviceActivityLevel` is above the policy's maximum (or not
        /// evaluated while a maximum is set).
        public static let deviceActivityExceeded = Code("play_integrity_device_activity_exceeded")
        /// A configured key is not a 32-byte AES key or a P-256 SubjectPublicKeyInfo (policy load).
        public static let invalidKey = Code("play_integrity_invalid_key")
        /// A service-account key file is not Google's JSON with an RSA PKCS#8 key (policy load),
        /// or the gateway could not sign an assertion with it.
        public static let serviceAccountInvalid = Code("play_integrity_service_account_invalid")
        /// Google's token endpoint or `decodeIntegrityToken` answered something that is not
        /// the JSON it documents.
        public static let googleAnswerMalformed = Code("play_integrity_google_answer_malformed")
        /// Standard tokens: Google could not be asked (breaker open, timeouts, 5xx or 429 after
        /// the retries, OAuth refused).
        public static let unavailable = Code("play_integrity_unavailable")
        /// Standard tokens: the app's daily budget of `decodeIntegrityToken` calls is spent.
        public static let quotaExhausted = Code("play_integrity_quota_exhausted")
        /// A protected request of a key whose last good verdict is older than the app's
        /// `reverify_after`: the app presents a fresh token first.
        public static let reverifyRequired = Code("play_integrity_reverify_required")
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

    /// Every code, for the documentation test.
    public static let allCodes: [Code] = [
        .badFormat, .unsupportedAlgorithm, .decryptionFailed, .signatureInvalid, .payloadMalformed, .nonceMismatch,
        .requestHashMismatch, .stale, .packageMismatch, .certificateMismatch, .appNotRecognized,
        .deviceIntegrityInsufficient, .notLicensed, .deviceActivityExceeded, .invalidKey, .serviceAccountInvalid,
        .googleAnswerMalformed, .unavailable, .quotaExhausted, .reverifyRequired,
    ]

    /// At most 64 printable ASCII characters of attacker text, for a reason string.
    static func printable(_ text: String) -> String {
        String(
            text.unicodeScalars.prefix(64).map {
                $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F ? Character($0) : "?"
            })
    }
}
