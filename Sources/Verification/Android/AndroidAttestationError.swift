/// The one error type of Android Key Attestation verification.
///
/// Modelled on `VerificationError`: `code` is stable (logs, metrics, JSON error bodies);
/// `reason` says what was checked and what differed. Equality compares `code` only, so
/// tests assert on codes.
package struct AndroidAttestationError: StableCodedError {
    package struct Code: StableErrorCode {
        package let rawValue: String
        private init(_ rawValue: String) { self.rawValue = rawValue }

        /// Empty or too long a chain, a signature that does not verify, an issuer name that is
        /// not the next certificate's subject.
        package static let chainInvalid = Code("android_chain_invalid")
        /// A chain element that is not one DER X.509 certificate, or whose fields cannot be read.
        package static let certificateMalformed = Code("android_certificate_malformed")
        /// The last certificate's key is neither a pinned Google root key nor an extra anchor.
        package static let rootUntrusted = Code("android_root_untrusted")
        /// A certificate below the root is past its notAfter, or is never valid.
        package static let certificateExpired = Code("android_certificate_expired")
        /// A certificate below the root is before its notBefore.
        package static let certificateNotYetValid = Code("android_certificate_not_yet_valid")
        /// A certificate's serial is on the revocation status list (revoked or suspended).
        package static let certificateRevoked = Code("android_certificate_revoked")
        /// The leaf has no KeyDescription extension.
        package static let keyDescriptionMissing = Code("android_key_description_missing")
        /// A KeyDescription that is not the schema's DER, or exceeds a limit.
        package static let keyDescriptionMalformed = Code("android_key_description_malformed")
        /// A KeyDescription above a certificate without one (only the leaf and the ATTEST_KEY
        /// certificates right above it may carry one).
        package static let keyDescriptionMisplaced = Code("android_key_description_misplaced")
        /// A certificate above the leaf carries a KeyDescription but is not an ATTEST_KEY key
        /// of the leaf's security level.
        package static let attestKeyForged = Code("android_attest_key_forged")
        /// attestationSecurityLevel is Software (and the caller does not allow it).
        package static let securityLevelSoftware = Code("android_security_level_software")
        /// attestationSecurityLevel differs from the KeyMint (keymaster) security level.
        package static let securityLevelMismatch = Code("android_security_level_mismatch")
        /// hardwareEnforced has no RootOfTrust.
        package static let rootOfTrustMissing = Code("android_root_of_trust_missing")
        /// A revocation status list that is not Google's JSON format.
        package static let revocationListMalformed = Code("android_revocation_list_malformed")
        /// An extra trust anchor PEM the verifier was configured with is not a certificate.
        package static let trustAnchorInvalid = Code("android_trust_anchor_invalid")
        /// OpenSSL failed on our side (allocation, internal error): not the input's fault.
        package static let internalCryptoError = Code("android_internal_crypto_error")

        // MARK: Enrollment requirements (`AndroidKeyRequirements`: the policy's apps)

        /// attestationChallenge is not the exact bytes of the challenge the gateway issued.
        package static let challengeMismatch = Code("android_challenge_mismatch")
        /// attestationApplicationId is absent, or names no package the policy lists.
        package static let packageMismatch = Code("android_package_mismatch")
        /// The package is listed, but no signing-certificate digest matches the configured ones.
        package static let signingDigestMismatch = Code("android_signing_digest_mismatch")
        /// The key's security level is below the app's `security_level` (TEE where StrongBox is required).
        package static let securityLevelTooLow = Code("android_security_level_too_low")
        /// RootOfTrust says the bootloader is unlocked (deviceLocked false).
        package static let bootloaderUnlocked = Code("android_bootloader_unlocked")
        /// RootOfTrust verifiedBootState is not Verified (SelfSigned, Unverified or Failed).
        package static let verifiedBootRefused = Code("android_verified_boot_refused")
        /// osPatchLevel is absent or older than the app's `min_patch_level`.
        package static let patchLevelTooOld = Code("android_patch_level_too_old")
        /// The key is not an EC P-256 signing key (purpose SIGN, algorithm EC, curve P-256).
        package static let keyPropertiesRefused = Code("android_key_properties_refused")
        /// The key was not generated inside KeyMint (origin is not GENERATED: imported, derived).
        package static let keyOriginRefused = Code("android_key_origin_refused")

        // MARK: Signed requests (`AndroidRequestSignature`)

        /// `X-App-Assertion` of an Android key is not 8 counter bytes and a DER signature.
        package static let requestSignatureMalformed = Code("android_request_signature_malformed")
        /// The counter is 0 or above 4294967295.
        package static let requestCounterOutOfRange = Code("android_request_counter_out_of_range")
        /// The ECDSA signature does not verify under the enrolled key for this request.
        package static let requestSignatureInvalid = Code("android_request_signature_invalid")

        /// Every code, for documentation and tests.
        package static let all: [Code] = [
            .chainInvalid, .certificateMalformed, .rootUntrusted, .certificateExpired, .certificateNotYetValid,
            .certificateRevoked, .keyDescriptionMissing, .keyDescriptionMalformed, .keyDescriptionMisplaced,
            .attestKeyForged, .securityLevelSoftware, .securityLevelMismatch, .rootOfTrustMissing,
            .revocationListMalformed, .trustAnchorInvalid, .internalCryptoError, .challengeMismatch,
            .packageMismatch, .signingDigestMismatch, .securityLevelTooLow, .bootloaderUnlocked,
            .verifiedBootRefused, .patchLevelTooOld, .keyPropertiesRefused, .keyOriginRefused,
            .requestSignatureMalformed, .requestCounterOutOfRange, .requestSignatureInvalid,
        ]
    }

    package let code: Code
    package let reason: String
    package let file: String
    package let line: Int

    package init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }
}
