import Testing
import Verification

@Suite struct AuthenticatorDataTests {
    static let rpIDHash = SHA256.hash(Array("ABCDE12345.com.example.app".utf8))
    static let keyID = [UInt8](repeating: 0x11, count: 32)

    static func header(flags: UInt8, counter: UInt32) -> [UInt8] {
        rpIDHash + [flags] + [
            UInt8(counter >> 24), UInt8(counter >> 16 & 0xff), UInt8(counter >> 8 & 0xff), UInt8(counter & 0xff),
        ]
    }

    static var coseKey: [UInt8] {
        [0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21, 0x58, 0x20] + [UInt8](repeating: 0xaa, count: 32)
            + [0x22, 0x58, 0x20] + [UInt8](repeating: 0xbb, count: 32)
    }

    /// {"apple_bundle_version_01": "1", "apple_validation_category_01": h'03000000'}, as iOS 27 sends.
    static var appleExtensions: [UInt8] {
        var bytes: [UInt8] = [0xa2, 0x77] + Array("apple_bundle_version_01".utf8) + [0x61, 0x31]
        bytes += [0x78, 0x1c] + Array("apple_validation_category_01".utf8) + [0x44, 0x03, 0x00, 0x00, 0x00]
        return bytes
    }

    static func attestation(flags: UInt8 = 0x40, credentialID: [UInt8] = keyID, trailing: [UInt8] = []) -> [UInt8] {
        header(flags: flags, counter: 0) + AppAttestEnvironment.production.aaguid
            + [UInt8(credentialID.count >> 8), UInt8(credentialID.count & 0xff)] + credentialID + coseKey + trailing
    }

    @Test func parsesAttestationAuthenticatorData() throws {
        let data = try AuthenticatorData(Self.attestation(), context: .attestation)
        #expect(data.rpIDHash == Self.rpIDHash)
        #expect(data.flags == .attestedCredentialData)
        #expect(data.signCount == 0)
        let credential = try #require(data.attestedCredentialData)
        #expect(credential.aaguid == AppAttestEnvironment.production.aaguid)
        #expect(credential.credentialID == Self.keyID)
        #expect(credential.credentialPublicKey[integerKey: 3]?.integerValue == -7)
        #expect(data.extensions == nil)
        #expect(data.rawValue.count == 164)
    }

    @Test func acceptsExtensionsMapAfterCOSEKeyWithoutFlagED() throws {
        let bytes = Self.attestation(flags: 0x40, trailing: Self.appleExtensions)
        #expect(bytes.count == 226)  // the size reported for iOS 27 attestations
        let data = try AuthenticatorData(bytes, context: .attestation)
        #expect(data.extensions?[textKey: "apple_bundle_version_01"] == .textString("1"))
        #expect(data.extensions?[textKey: "apple_validation_category_01"] == .byteString([3, 0, 0, 0]))
        #expect(data.attestedCredentialData?.credentialID == Self.keyID)
    }

    @Test func acceptsExtensionsMapAfterCOSEKeyWithFlagED() throws {
        let data = try AuthenticatorData(
            Self.attestation(flags: 0xc0, trailing: Self.appleExtensions), context: .attestation)
        #expect(data.flags.contains(.extensionData))
        #expect(data.extensions?.mapValue?.count == 2)
    }

    @Test func rejectsFlagEDWithoutExtensions() {
        #expect(throws: VerificationError(.malformedAuthenticatorData, "")) {
            try AuthenticatorData(Self.attestation(flags: 0xc0), context: .attestation)
        }
        #expect(throws: VerificationError(.malformedAuthenticatorData, "")) {
            try AuthenticatorData(Self.header(flags: 0xc0, counter: 1), context: .assertion)
        }
    }

    @Test func rejectsTrailingBytesThatAreNotOneMap() {
        for trailing: [[UInt8]] in [
            [[0x00]], [[0x80]], [Self.appleExtensions + [0x00]], [[0xa1, 0x01]], [[0xa0, 0xa0]], [[0x41]],
        ] {
            #expect(throws: VerificationError(.malformedAuthenticatorData, ""), "\(trailing[0])") {
                try AuthenticatorData(Self.attestation(trailing: trailing[0]), context: .attestation)
            }
            #expect(throws: VerificationError(.malformedAuthenticatorData, ""), "\(trailing[0])") {
                try AuthenticatorData(Self.header(flags: 0x40, counter: 1) + trailing[0], context: .assertion)
            }
        }
    }

    @Test func assertionWithFlagATAndNoCredentialData() throws {
        let data = try AuthenticatorData(Self.header(flags: 0x40, counter: 7), context: .assertion)
        #expect(data.signCount == 7)
        #expect(data.attestedCredentialData == nil)
        #expect(data.extensions == nil)
    }

    @Test func assertionWithExtensionsMapWithOrWithoutED() throws {
        for flags: UInt8 in [0x00, 0x40, 0x80, 0xc0, 0x45] {
            let data = try AuthenticatorData(
                Self.header(flags: flags, counter: 0x01020304) + Self.appleExtensions, context: .assertion)
            #expect(data.signCount == 0x0102_0304)
            #expect(data.extensions?[textKey: "apple_bundle_version_01"] == .textString("1"))
        }
    }

    @Test func assertionCarryingCredentialDataIsRejected() {
        // Assertions never carry attested credential data: bytes after the header must be a map.
        #expect(throws: VerificationError(.malformedAuthenticatorData, "")) {
            try AuthenticatorData(Self.attestation(), context: .assertion)
        }
    }

    @Test func attestationWithoutFlagATIsRejected() {
        #expect(throws: VerificationError(.malformedAuthenticatorData, "")) {
            try AuthenticatorData(Self.attestation(flags: 0x00), context: .attestation)
        }
    }

    @Test func rejectsTruncationAtEveryLength() throws {
        let full = Self.attestation(trailing: Self.appleExtensions)
        _ = try AuthenticatorData(full, context: .attestation)
        // Cutting exactly at the end of the COSE key leaves valid data without extensions.
        for length in 0..<full.count where length != Self.attestation().count {
            #expect(throws: VerificationError(.malformedAuthenticatorData, ""), "length \(length)") {
                try AuthenticatorData(Array(full.prefix(length)), context: .attestation)
            }
        }
        for length in 0..<37 {
            #expect(throws: VerificationError(.malformedAuthenticatorData, "")) {
                try AuthenticatorData(Array(Self.header(flags: 0x40, counter: 1).prefix(length)), context: .assertion)
            }
        }
    }

    @Test func rejectsOversizedCredentialIDLength() {
        var bytes = Self.attestation()
        bytes[53] = 0xff
        bytes[54] = 0xff
        #expect(throws: VerificationError(.malformedAuthenticatorData, "")) {
            try AuthenticatorData(bytes, context: .attestation)
        }
        bytes[53] = 0x00
        bytes[54] = 0xa0  // 160: longer than what follows
        #expect(throws: VerificationError(.malformedAuthenticatorData, "")) {
            try AuthenticatorData(bytes, context: .attestation)
        }
    }

    @Test func rejectsCOSEKeyThatIsNotAMap() {
        let bytes =
            Self.header(flags: 0x40, counter: 0) + AppAttestEnvironment.development.aaguid + [0x00, 0x01, 0x42, 0x01]
        #expect(throws: VerificationError(.malformedAuthenticatorData, "")) {
            try AuthenticatorData(bytes, context: .attestation)
        }
    }

    @Test func environmentFromAAGUID() {
        #expect(AppAttestEnvironment(aaguid: Array("appattestdevelop".utf8)) == .development)
        #expect(AppAttestEnvironment(aaguid: Array("appattest".utf8) + [0, 0, 0, 0, 0, 0, 0]) == .production)
        #expect(AppAttestEnvironment(aaguid: Array("appattest".utf8) + [0, 0, 0, 0, 0, 0, 1]) == nil)
        #expect(AppAttestEnvironment(aaguid: Array("appattest".utf8)) == nil)
        #expect(AppAttestEnvironment(aaguid: [UInt8](repeating: 0, count: 16)) == nil)
    }
}
