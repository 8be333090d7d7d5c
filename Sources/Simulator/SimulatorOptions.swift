public import Foundation
public import Verification

/// Knobs for `SimulatorAuthority.attestation`. The defaults mint a valid attestation in Apple's
/// exact format; each knob breaks (or, for `extensions`, varies) exactly one thing, so tests can
/// make exactly one verifier check fail.
public struct AttestationOptions: Sendable {
    /// The moment of attestation: leaf validity and receipt times derive from it. Default: now.
    public var time: Date?
    /// `fmt`; anything but "apple-appattest" fails `unsupported_format`.
    public var format: String = "apple-appattest"
    /// Certify a nonce that is not SHA256(authData || clientDataHash) → `nonce_mismatch`.
    public var corruptNonce: Bool = false
    /// Leave the nonce extension out of the credential certificate → `missing_nonce_extension`.
    public var omitNonceExtension: Bool = false
    /// Certify this device's public key instead of the attesting device's (the COSE key and
    /// credentialId stay the attesting device's) → `key_id_mismatch`.
    public var certifiedDevice: SimulatedDevice?
    /// rpIdHash other than SHA256(App ID) → `app_id_mismatch`.
    public var rpIDHash: [UInt8]?
    /// signCount; non-zero → `counter_not_zero`.
    public var counter: UInt32 = 0
    /// AAGUID other than the environment's (16 bytes) → `unknown_aaguid`.
    public var aaguid: [UInt8]?
    /// credentialId other than the key ID → `credential_id_mismatch`.
    public var credentialID: [UInt8]?
    /// Leaf validity; default `time` - 1 day ... `time` + 2 days (Apple's leaves live 3 days).
    /// Put `time` outside → `certificate_expired`.
    public var leafNotBefore: Date?
    public var leafNotAfter: Date?
    /// Sign the leaf under a freshly generated CA nobody trusts → `certificate_chain_invalid`.
    public var signLeafWithUntrustedCA: Bool = false
    /// x5c = [leaf] only → `certificate_chain_invalid`.
    public var omitIntermediate: Bool = false
    /// A CBOR extensions map after the COSE key, as newer OS versions append.
    public var extensions: AuthenticatorExtensions = .none
    /// Override the flags byte (default 0x40 AT; 0xC0 when `extensions == .withFlagED`).
    public var flags: UInt8?
    /// Put a receipt in `attStmt` (Apple always does).
    public var includeReceipt: Bool = true
    /// iOS 27 launch validation entries written into the extensions map (flag ED clear, as
    /// Apple does in attestations; overrides `extensions` when not empty).
    public var launchValidation: LaunchValidation = LaunchValidation()
    /// The key access-control extension (OID 1.2.840.113635.100.8.6) macOS 27 writes into the
    /// credential certificate: `SEQUENCE { [3] EXPLICIT OCTET STRING blob }` with this blob
    /// (`KeyAccessPolicyBlob.macOSFullSecurity` for a Mac in Full Security mode with SIP on).
    public var keyAccessPolicyBlob: [UInt8]?

    public init() {}

    public enum AuthenticatorExtensions: Sendable {
        case none
        /// Extensions map present, flag ED (0x80) not set (what Apple's 2026 sample does).
        case withoutFlagED
        /// Extensions map present and flag ED set.
        case withFlagED
    }
}

/// Knobs for `SimulatedDevice.assertion`.
public struct AssertionOptions: Sendable {
    /// The flags byte; real devices set AT (0x40) without attested credential data.
    public var flags: UInt8 = 0x40
    /// rpIdHash other than SHA256(App ID) → `app_id_mismatch`.
    public var rpIDHash: [UInt8]?
    /// Flip a bit of the DER signature's last byte → `invalid_signature`.
    public var corruptSignature: Bool = false
    /// Sign with this device's key instead → `invalid_signature`.
    public var signingDevice: SimulatedDevice?
    /// Sign authenticatorData || clientDataHash instead of the nonce (a classic server/client
    /// mismatch; real verifiers must reject it) → `invalid_signature`.
    public var signConcatenationInsteadOfNonce: Bool = false
    /// An extensions map after the counter (flag ED set).
    public var appendExtensions: Bool = false
    /// iOS 27 launch validation entries, written as an extensions map after the counter
    /// (flag ED clear, as real assertions that set AT do). Empty: no map.
    public var launchValidation: LaunchValidation = LaunchValidation()

    public init() {}
}

/// Knobs for `SimulatorAuthority.receipt`.
public struct ReceiptOptions: Sendable {
    /// Field 12; default now.
    public var creationTime: Date?
    /// `ATTEST` (from attestation) or `RECEIPT` (refreshed, with a risk metric).
    public var type: ReceiptType = .attest
    /// Field 17 (refreshed receipts).
    public var riskMetric: Int?
    /// Field 19 of a `RECEIPT`: the earliest time to ask for the next one. Default: creation
    /// time + 1 day. The fake Apple server's tests mint refreshed receipts with a chosen one.
    public var notBefore: Date?
    /// Leave these field numbers out.
    public var omittedFields: Set<Int> = []
    /// Split the signed content into chunks of this size (Apple: 1000), BER indefinite lengths.
    /// nil: one definite-length DER structure (as Apple's refreshed receipts are).
    public var chunkSize: Int? = 1000

    public init() {}
}
