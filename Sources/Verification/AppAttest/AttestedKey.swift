public import Foundation

/// What a successful attestation proves: the key, whose app it is, and where.
public struct AttestedKey: Sendable, Hashable {
    /// SHA256 of `publicKey` (what the app calls keyId).
    public var keyID: [UInt8]
    /// X9.62 uncompressed P-256 point, 65 bytes.
    public var publicKey: [UInt8]
    public var appID: String
    public var environment: AppAttestEnvironment
    /// `attStmt.receipt` as received (PKCS#7, BER).
    public var receipt: [UInt8]
    /// The credential certificate's notAfter.
    public var certificateNotAfter: Date
    /// Launch validation category and bundle version at attestation (iOS 27+; empty before).
    public var launchValidation: LaunchValidation
    /// The key access-control extension's verdict (macOS 27+); nil when the certificate has none.
    public var keyAccessPolicy: KeyAccessPolicy?

    public init(
        keyID: [UInt8],
        publicKey: [UInt8],
        appID: String,
        environment: AppAttestEnvironment,
        receipt: [UInt8],
        certificateNotAfter: Date,
        launchValidation: LaunchValidation = LaunchValidation(),
        keyAccessPolicy: KeyAccessPolicy? = nil
    ) {
        self.keyID = keyID
        self.publicKey = publicKey
        self.appID = appID
        self.environment = environment
        self.receipt = receipt
        self.certificateNotAfter = certificateNotAfter
        self.launchValidation = launchValidation
        self.keyAccessPolicy = keyAccessPolicy
    }
}
