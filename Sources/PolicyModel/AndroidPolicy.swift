public import GoogleClient

/// A platform whose devices prove themselves to the gateway: App Attest keys (`ios`, which
/// covers every Apple platform App Attest runs on) or Android Keystore keys (`android`).
public enum AttestPlatform: String, Sendable, Hashable, CaseIterable {
    case ios, android
}

/// The `android:` block: the Android apps whose Keystore keys may enroll, and extra trust
/// anchors besides Google's pinned hardware attestation roots.
public struct AndroidPolicy: Sendable, Hashable {
    /// `android.apps`, in policy order; at least one.
    public var apps: [AndroidAppPolicy]
    /// `android.trust_anchors`: resolved PEM file paths (test roots, a root Google adds before
    /// a release pins it).
    public var trustAnchorFiles: [String]
    /// The PEM text of each trust anchor file, read when the policy was loaded.
    public var trustAnchorsPEM: [String]
    /// `android.revocation`: where Google's revocation status list comes from. The decoder's
    /// default (no `revocation:`) is Google's list (`AndroidRevocationSettings.google`); nil
    /// (`revocation: off`, or a value built in code) checks no list.
    public var revocation: AndroidRevocationSettings?

    public init(
        apps: [AndroidAppPolicy], trustAnchorFiles: [String] = [], trustAnchorsPEM: [String] = [],
        revocation: AndroidRevocationSettings? = nil
    ) {
        self.apps = apps
        self.trustAnchorFiles = trustAnchorFiles
        self.trustAnchorsPEM = trustAnchorsPEM
        self.revocation = revocation
    }
}

/// One `android.apps[i]`.
public struct AndroidAppPolicy: Sendable, Hashable {
    /// The lowest Keystore security level an app accepts.
    public enum SecurityLevel: String, Sendable, Hashable, CaseIterable {
        /// StrongBox only (a separate secure chip).
        case strongbox
        /// The TEE or StrongBox (the default).
        case trustedEnvironment = "trusted_environment"
        /// Any, Software included: emulators in development only (the software attestation key
        /// is public, so such a key proves nothing).
        case software
    }

    /// `package`: the application ID, e.g. `com.example.app`.
    public var packageName: String
    /// `signing_digests`: SHA-256 of each signing certificate (32 bytes each), at least one.
    public var signingDigests: [[UInt8]]
    public var securityLevel: SecurityLevel = .trustedEnvironment
    /// `require_locked_bootloader` (default true).
    public var requireLockedBootloader = true
    /// `require_verified_boot` (default true): verifiedBootState must be Verified.
    public var requireVerifiedBoot = true
    /// `min_patch_level` (YYYYMM); nil = none.
    public var minimumPatchLevel: Int? = nil
    /// `play_integrity:`: a classic Play Integrity verdict required at enrollment; nil = not
    /// required.
    public var playIntegrity: PlayIntegrityConfiguration? = nil

    public init(packageName: String, signingDigests: [[UInt8]]) {
        self.packageName = packageName
        self.signingDigests = signingDigests
    }
}
