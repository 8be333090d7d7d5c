/// What one configured Android app requires of an enrolled key (`android.apps[i]` in the
/// policy, converted by the enforcement layer): the package, its signing certificates, and the
/// device state. Pure data.
package struct AndroidAppRequirement: Sendable, Hashable {
    /// The application ID (`com.example.app`).
    package var packageName: String
    /// SHA-256 digests (32 bytes each) of the app's signing certificates: every digest in the
    /// attestation's signatureDigests must be one of these.
    package var signingDigests: [[UInt8]]
    /// The lowest attestation security level accepted (`.trustedEnvironment` accepts StrongBox too).
    package var minimumSecurityLevel: AndroidSecurityLevel
    /// RootOfTrust deviceLocked must be true.
    package var requiresLockedBootloader: Bool
    /// RootOfTrust verifiedBootState must be Verified.
    package var requiresVerifiedBoot: Bool
    /// Lowest osPatchLevel (YYYYMM) accepted; nil: any, even absent.
    package var minimumPatchLevel: Int?

    package init(
        packageName: String, signingDigests: [[UInt8]],
        minimumSecurityLevel: AndroidSecurityLevel = .trustedEnvironment,
        requiresLockedBootloader: Bool = true, requiresVerifiedBoot: Bool = true, minimumPatchLevel: Int? = nil
    ) {
        self.packageName = packageName
        self.signingDigests = signingDigests
        self.minimumSecurityLevel = minimumSecurityLevel
        self.requiresLockedBootloader = requiresLockedBootloader
        self.requiresVerifiedBoot = requiresVerifiedBoot
        self.minimumPatchLevel = minimumPatchLevel
    }
}
