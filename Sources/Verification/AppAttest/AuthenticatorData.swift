/// WebAuthn authenticator data as App Attest produces it, parsed by its flags and lengths.
///
/// Layout: rpIdHash (32) | flags (1) | signCount (4, big endian) | [attested credential data:
/// aaguid (16) | credentialIdLength (2, BE) | credentialId | COSE public key (CBOR)] |
/// [extensions (CBOR map)].
///
/// What real devices send, and what this parser therefore accepts:
/// - Assertions set flag AT (0x40) but carry no attested credential data; parse them with
///   `.assertion`: the 37-byte header, optionally followed by one extensions map.
/// - Attestations from newer OS versions append an extensions map after the COSE key
///   without setting flag ED (0x80); older ones end at the COSE key. Either is accepted.
/// Anything after the header that is not exactly that (a CBOR map spanning the rest) is
/// rejected with `malformed_authenticator_data`.
public struct AuthenticatorData: Sendable, Hashable {
    /// Which object the data came from: only attestations carry attested credential data.
    public enum Context: Sendable, Hashable {
        case attestation
        case assertion
    }

    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        /// UP, 0x01.
        public static let userPresent = Flags(rawValue: 0x01)
        /// UV, 0x04.
        public static let userVerified = Flags(rawValue: 0x04)
        /// AT, 0x40.
        public static let attestedCredentialData = Flags(rawValue: 0x40)
        /// ED, 0x80.
        public static let extensionData = Flags(rawValue: 0x80)
    }

    public struct AttestedCredentialData: Sendable, Hashable {
        public var aaguid: [UInt8]
        public var credentialID: [UInt8]
        /// The COSE_Key as decoded (a CBOR map).
        public var credentialPublicKey: CBORValue
    }

    /// Header size: rpIdHash + flags + signCount.
    public static let headerByteCount = 37
    /// Largest credential ID accepted (App Attest uses 32 bytes; WebAuthn allows up to 1023).
    public static let maxCredentialIDByteCount = 1023

    /// The bytes as received (what the signature and the nonce cover).
    public var rawValue: [UInt8]
    public var rpIDHash: [UInt8]
    public var flags: Flags
    public var signCount: UInt32
    public var attestedCredentialData: AttestedCredentialData?
    /// The trailing extensions map, if one was present (whatever flag ED said).
    public var extensions: CBORValue?
    /// The launch validation entries of `extensions` (iOS 27+), decoded strictly.
    public var launchValidation: LaunchValidation

    public init(_ bytes: [UInt8], context: Context) throws(VerificationError) {
        guard bytes.count >= Self.headerByteCount else {
            throw VerificationError(
                .malformedAuthenticatorData,
                "authenticator data is \(bytes.count) bytes, shorter than the \(Self.headerByteCount)-byte header")
        }
        self.rawValue = bytes
        self.rpIDHash = Array(bytes[0..<32])
        self.flags = Flags(rawValue: bytes[32])
        self.signCount = UInt32(bytes[33]) << 24 | UInt32(bytes[34]) << 16 | UInt32(bytes[35]) << 8 | UInt32(bytes[36])
        self.attestedCredentialData = nil
        self.extensions = nil
        self.launchValidation = LaunchValidation()

        var offset = Self.headerByteCount
        let decoder = CBORDecoder()

        if context == .attestation {
            guard self.flags.contains(.attestedCredentialData) else {
                throw VerificationError(
                    .malformedAuthenticatorData,
                    "attestation authenticator data has flags 0x\(Self.hex(self.flags.rawValue)) without AT (0x40)")
            }
            guard bytes.count - offset >= 18 else {
                throw VerificationError(
                    .malformedAuthenticatorData,
                    "attested credential data truncated: \(bytes.count - offset) byte(s) after the header, need at least 18"
                )
            }
            let aaguid = Array(bytes[offset..<(offset + 16)])
            offset += 16
            let idLength = Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
            offset += 2
            guard idLength <= Self.maxCredentialIDByteCount else {
                throw VerificationError(
                    .malformedAuthenticatorData,
                    "credential ID length \(idLength) exceeds \(Self.maxCredentialIDByteCount)")
            }
            guard bytes.count - offset >= idLength else {
                throw VerificationError(
                    .malformedAuthenticatorData,
                    "credential ID length \(idLength) but only \(bytes.count - offset) byte(s) left")
            }
            let credentialID = Array(bytes[offset..<(offset + idLength)])
            offset += idLength
            guard offset < bytes.count else {
                throw VerificationError(.malformedAuthenticatorData, "credential public key missing")
            }
            let key: CBORValue
            do {
                (key, offset) = try decoder.decodePrefix(bytes, from: offset)
            } catch {
                throw VerificationError(.malformedAuthenticatorData, "credential public key: \(error.reason)")
            }
            guard case .map = key else {
                throw VerificationError(
                    .malformedAuthenticatorData, "credential public key is a \(key.kindName), not a COSE_Key map")
            }
            self.attestedCredentialData = AttestedCredentialData(
                aaguid: aaguid, credentialID: credentialID, credentialPublicKey: key)
        }

        if offset < bytes.count {
            // Extensions: one CBOR map spanning the rest, whether or not ED is set (Apple
            // leaves ED clear in attestations and in assertions that set AT).
            let value: CBORValue
            do {
                (value, offset) = try decoder.decodePrefix(bytes, from: offset)
            } catch {
                throw VerificationError(
                    .malformedAuthenticatorData,
                    "data after \(context == .attestation ? "the credential public key" : "the header") is not a CBOR extensions map: \(error.reason)"
                )
            }
            guard case .map = value else {
                throw VerificationError(.malformedAuthenticatorData, "extensions are a \(value.kindName), not a map")
            }
            guard offset == bytes.count else {
                throw VerificationError(
                    .malformedAuthenticatorData, "\(bytes.count - offset) trailing byte(s) after the extensions map")
            }
            self.extensions = value
            self.launchValidation = try LaunchValidation(extensions: value)
        } else if self.flags.contains(.extensionData) {
            throw VerificationError(.malformedAuthenticatorData, "flag ED (0x80) is set but no extensions follow")
        }
    }

    static func hex(_ byte: UInt8) -> String {
        [byte].hexString
    }
}
