import Verification

/// What a simulated Android Keystore key claims in its KeyDescription: good values by default
/// (TEE, locked, Verified boot, purpose SIGN, EC P-256, GENERATED), each changeable to mint a
/// chain the gateway must refuse.
public struct AndroidAttestationOptions: Sendable {
    public var packageName = "com.example.app"
    public var packageVersion = 1
    /// SHA-256 of the app's signing certificates.
    public var signingDigests: [[UInt8]] = [AndroidAttestationOptions.defaultSigningDigest]
    /// 0 Software, 1 TrustedEnvironment, 2 StrongBox (both security levels of the description).
    public var securityLevel = 1
    public var deviceLocked = true
    /// 0 Verified, 1 SelfSigned, 2 Unverified, 3 Failed.
    public var verifiedBootState = 0
    /// YYYYMM; nil: the tag is left out.
    public var osPatchLevel: Int? = 202_609
    public var osVersion = 160_000
    /// 3 (Keymaster 3), 4, 100, 200, 300, 400 ...
    public var attestationVersion = 300
    /// KeyPurpose values (2 SIGN).
    public var purposes = [2]
    /// 3 EC.
    public var algorithm = 3
    /// 1 P-256.
    public var ecCurve = 1
    /// 0 GENERATED, 2 IMPORTED.
    public var origin = 0

    /// SHA-256 of "attest-gateway simulator signing certificate": the digest `sim` apps use.
    public static let defaultSigningDigest = SHA256.hash(Array("attest-gateway simulator signing certificate".utf8))

    public init() {}
}
