/// The KeyDescription extension (OID 1.3.6.1.4.1.11129.2.1.17) of an Android Key Attestation
/// certificate: what KeyMint says about the key in that certificate.
///
/// One schema serves every attestation version (1 to 4 for Keymaster, 100 to 500 and later
/// for KeyMint): the eight fields never changed, new versions only add authorization tags.
package struct AndroidKeyDescription: Sendable, Equatable {
    package static let oid = "1.3.6.1.4.1.11129.2.1.17"

    package let attestationVersion: Int
    package let attestationSecurityLevel: AndroidSecurityLevel
    /// keymasterVersion before KeyMint.
    package let keyMintVersion: Int
    package let keyMintSecurityLevel: AndroidSecurityLevel
    package let attestationChallenge: [UInt8]
    package let uniqueID: [UInt8]
    package let softwareEnforced: AndroidAuthorizationList
    package let hardwareEnforced: AndroidAuthorizationList

    /// Parses the extension's value (the contents of its extnValue OCTET STRING).
    package init(extensionValue: [UInt8]) throws(AndroidAttestationError) {
        let what = "KeyDescription"
        guard extensionValue.count <= AndroidDER.maximumInputSize else {
            throw AndroidDER.malformed(what, "\(extensionValue.count) bytes exceed \(AndroidDER.maximumInputSize)")
        }
        let top = try AndroidDER.single(extensionValue, what)
        let fields = try AndroidDER.sequence(top, what, count: 8)
        self.attestationVersion = try AndroidDER.integer(fields[0], "attestationVersion")
        self.attestationSecurityLevel = try Self.securityLevel(fields[1], "attestationSecurityLevel")
        self.keyMintVersion = try AndroidDER.integer(fields[2], "keyMintVersion")
        self.keyMintSecurityLevel = try Self.securityLevel(fields[3], "keyMintSecurityLevel")
        self.attestationChallenge = try AndroidDER.octets(fields[4], "attestationChallenge")
        self.uniqueID = try AndroidDER.octets(fields[5], "uniqueId")
        self.softwareEnforced = try AndroidAuthorizationList(fields[6], "softwareEnforced")
        self.hardwareEnforced = try AndroidAuthorizationList(fields[7], "hardwareEnforced")
    }

    /// The list KeyMint enforces for a key of this attestation's level: a Software
    /// attestation enforces nothing in hardware.
    package var enforcedList: AndroidAuthorizationList {
        self.attestationSecurityLevel == .software ? self.softwareEnforced : self.hardwareEnforced
    }

    private static func securityLevel(_ element: ASN1Element, _ what: String) throws(AndroidAttestationError)
        -> AndroidSecurityLevel
    {
        let value = try AndroidDER.integer(element, what, identifier: AndroidDER.enumerated)
        guard let level = AndroidSecurityLevel(rawValue: value) else {
            throw AndroidDER.malformed(what, "unknown SecurityLevel \(value)")
        }
        return level
    }
}
