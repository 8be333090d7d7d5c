/// The one error type of the Verification module.
///
/// `code` is stable (it is what the CLI prints, what the gateway puts in JSON error
/// bodies and metrics); `reason` says what was checked and what differed. Equality
/// compares `code` only, so tests assert on codes.
public struct VerificationError: StableCodedError {
    public struct Code: StableErrorCode {
        public let rawValue: String
        private init(_ rawValue: String) { self.rawValue = rawValue }

        // Decoding
        public static let malformedCBOR = Code("malformed_cbor")
        public static let malformedAuthenticatorData = Code("malformed_authenticator_data")
        public static let malformedAttestation = Code("malformed_attestation")
        public static let malformedAssertion = Code("malformed_assertion")
        public static let malformedCertificate = Code("malformed_certificate")
        public static let invalidPublicKey = Code("invalid_public_key")
        /// A private key that is not an unencrypted PKCS#8 `PrivateKeyInfo` (`ECPrivateKey`).
        public static let privateKeyNotPKCS8 = Code("private_key_not_pkcs8")
        /// A PKCS#8 private key of another algorithm or curve than EC P-256 (`ECPrivateKey`).
        public static let privateKeyNotP256 = Code("private_key_not_p256")
        public static let invalidInput = Code("invalid_input")
        /// An `apple_validation_category_01` / `apple_bundle_version_01` extension entry of the
        /// wrong CBOR type or size (`LaunchValidation`).
        public static let malformedLaunchValidation = Code("malformed_launch_validation")

        // Attestation checks (DESIGN.md numbering)
        public static let unsupportedFormat = Code("unsupported_format")
        public static let certificateChainInvalid = Code("certificate_chain_invalid")  // 1
        public static let certificateExpired = Code("certificate_expired")  // 1, time outside validity
        public static let nonceMismatch = Code("nonce_mismatch")  // 2, 3
        public static let missingNonceExtension = Code("missing_nonce_extension")  // 3
        public static let keyIDMismatch = Code("key_id_mismatch")  // 4
        public static let appIDMismatch = Code("app_id_mismatch")  // 5 (and assertion 3)
        public static let counterNotZero = Code("counter_not_zero")  // 6
        public static let unknownAAGUID = Code("unknown_aaguid")  // 7
        public static let environmentMismatch = Code("environment_mismatch")  // 7
        public static let credentialIDMismatch = Code("credential_id_mismatch")  // 8

        // Assertion checks
        public static let invalidSignature = Code("invalid_signature")
        public static let counterNotIncreasing = Code("counter_not_increasing")

        // Receipt checks
        public static let malformedReceipt = Code("malformed_receipt")
        public static let receiptSignatureInvalid = Code("receipt_signature_invalid")
        public static let receiptChainInvalid = Code("receipt_chain_invalid")
        public static let receiptAppIDMismatch = Code("receipt_app_id_mismatch")
        public static let receiptPublicKeyMismatch = Code("receipt_public_key_mismatch")
        public static let receiptFieldMissing = Code("receipt_field_missing")

        // OpenSSL failed on our side (allocation, internal error): not the input's fault.
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
