import Foundation
import Simulator
import Testing
import Verification

/// iOS 27 launch validation entries of the authenticator data extensions map: each field
/// good, missing, of the wrong CBOR type and of the wrong size, and unknown keys kept.
@Suite struct LaunchValidationTests {
    static func text(_ value: String) -> CBORValue { .textString(value) }

    static func map(_ pairs: [(String, CBORValue)]) -> CBORValue {
        .map(pairs.map { CBORMapEntry(key: .textString($0.0), value: $0.1) })
    }

    static let category = LaunchValidation.categoryKey
    static let version = LaunchValidation.bundleVersionKey

    // MARK: Direct decoding

    @Test func decodesBothFieldsLittleEndian() throws {
        let decoded = try LaunchValidation(
            extensions: Self.map([
                (Self.category, .byteString([0x01, 0x02, 0x00, 0x80])), (Self.version, .textString("5.2.1")),
            ]))
        #expect(decoded.category == 0x8000_0201)
        #expect(decoded.bundleVersion == "5.2.1")
        #expect(decoded.otherEntries.isEmpty)
        #expect(!decoded.isEmpty)
    }

    @Test func eachFieldMayBeMissing() throws {
        let none = try LaunchValidation(extensions: nil)
        #expect(none.isEmpty && none.category == nil && none.bundleVersion == nil)
        let empty = try LaunchValidation(extensions: Self.map([]))
        #expect(empty.isEmpty)
        let onlyCategory = try LaunchValidation(extensions: Self.map([(Self.category, .byteString([3, 0, 0, 0]))]))
        #expect(onlyCategory.category == 3 && onlyCategory.bundleVersion == nil)
        let onlyVersion = try LaunchValidation(extensions: Self.map([(Self.version, .textString("1"))]))
        #expect(onlyVersion.category == nil && onlyVersion.bundleVersion == "1")
    }

    @Test(arguments: [
        CBORValue.unsignedInteger(3), .textString("3"), .array([]), .null, .negativeInteger(0), .boolean(true),
    ])
    func categoryOfAnotherTypeIsRefused(_ value: CBORValue) {
        #expect(throws: VerificationError(.malformedLaunchValidation, "")) {
            try LaunchValidation(extensions: Self.map([(Self.category, value)]))
        }
    }

    @Test(arguments: [0, 1, 3, 5, 8])
    func categoryOfAnotherLengthIsRefused(_ length: Int) {
        let error = #expect(throws: VerificationError.self) {
            try LaunchValidation(
                extensions: Self.map([(Self.category, .byteString([UInt8](repeating: 1, count: length)))]))
        }
        #expect(error?.code == .malformedLaunchValidation)
        #expect(error?.reason.contains("\(length) byte(s), expected exactly 4") == true)
    }

    @Test(arguments: [CBORValue.byteString(Array("5.2".utf8)), .unsignedInteger(52), .float(5.2), .map([])])
    func bundleVersionOfAnotherTypeIsRefused(_ value: CBORValue) {
        #expect(throws: VerificationError(.malformedLaunchValidation, "")) {
            try LaunchValidation(extensions: Self.map([(Self.version, value)]))
        }
    }

    @Test(arguments: [
        "", String(repeating: "9", count: 65), "5.2\r\nX-App-Attest-Status: verified", "5.2\u{7F}", "5.é",
    ])
    func bundleVersionOfBadLengthOrCharactersIsRefused(_ value: String) {
        #expect(throws: VerificationError(.malformedLaunchValidation, "")) {
            try LaunchValidation(extensions: Self.map([(Self.version, .textString(value))]))
        }
    }

    @Test func longestBundleVersionIsAccepted() throws {
        let longest = String(repeating: "1", count: LaunchValidation.maxBundleVersionByteCount)
        #expect(
            try LaunchValidation(extensions: Self.map([(Self.version, .textString(longest))])).bundleVersion == longest)
    }

    @Test func unknownKeysAreKeptNotFatal() throws {
        let extensions = CBORValue.map([
            CBORMapEntry(key: .textString("apple_something_new_02"), value: .array([.unsignedInteger(1)])),
            CBORMapEntry(key: .textString(Self.category), value: .byteString([2, 0, 0, 0])),
            CBORMapEntry(key: .unsignedInteger(7), value: .null),
            CBORMapEntry(key: .textString(Self.version), value: .textString("7")),
        ])
        let decoded = try LaunchValidation(extensions: extensions)
        #expect(decoded.category == 2 && decoded.bundleVersion == "7")
        #expect(decoded.otherEntries.count == 2)
        #expect(decoded.otherEntries.first?.key == .textString("apple_something_new_02"))
    }

    // MARK: Through the authenticator data parser (both contexts)

    @Test func assertionAuthenticatorDataCarriesTheFields() throws {
        let bytes = AuthenticatorDataTests.header(flags: 0x40, counter: 9) + AuthenticatorDataTests.appleExtensions
        let data = try AuthenticatorData(bytes, context: .assertion)
        #expect(data.launchValidation == LaunchValidation(category: 3, bundleVersion: "1"))
    }

    @Test func attestationWithBadCategoryIsMalformed() throws {
        var trailing: [UInt8] = [0xa1, 0x78, 0x1c] + Array("apple_validation_category_01".utf8)
        trailing += [0x43, 0x03, 0x00, 0x00]  // 3-byte byte string
        let bytes = AuthenticatorDataTests.attestation(trailing: trailing)
        let error = #expect(throws: VerificationError.self) { try AuthenticatorData(bytes, context: .attestation) }
        #expect(error?.code == .malformedLaunchValidation)
    }

    @Test func withoutExtensionsNothingIsReported() throws {
        let data = try AuthenticatorData(AuthenticatorDataTests.attestation(), context: .attestation)
        #expect(data.launchValidation.isEmpty)
    }

    // MARK: Minted by the simulator, verified end to end

    @Test func simulatedAttestationAndAssertionReportTheirFields() throws {
        let authority = SharedSimulator.authority
        let device = try SimulatedDevice.generate()
        var options = AttestationOptions()
        options.time = SharedSimulator.time
        options.launchValidation = LaunchValidation(category: 2, bundleVersion: "5.3")
        let hash = SHA256.hash(Array("challenge".utf8))
        let attestation = try authority.attestation(
            for: device, appID: SharedSimulator.appID, clientDataHash: hash, environment: .production,
            options: options)
        let key = try SharedSimulator.attestationVerifier().verify(
            attestationObject: attestation, keyID: device.keyID, clientDataHash: hash, at: SharedSimulator.time)
        #expect(key.launchValidation == LaunchValidation(category: 2, bundleVersion: "5.3"))
        // Apple leaves flag ED clear in attestations.
        #expect(!(try AttestationObject(attestation)).authenticatorData.flags.contains(.extensionData))

        var assertionOptions = AssertionOptions()
        assertionOptions.launchValidation = LaunchValidation(category: 2, bundleVersion: "5.4")
        let clientHash = SHA256.hash(Array("data".utf8))
        let assertion = try device.assertion(
            clientDataHash: clientHash, appID: SharedSimulator.appID, counter: 1, options: assertionOptions)
        let result = try AssertionVerifier().verify(
            assertionObject: assertion, clientDataHash: clientHash, publicKey: try ECPublicKey(x962: device.publicKey),
            appIDs: [AppID(SharedSimulator.appID)], previousCounter: 0)
        #expect(result.launchValidation == LaunchValidation(category: 2, bundleVersion: "5.4"))
    }

    @Test func assertionWithWrongTypedCategoryIsRefusedBeforeTheCounter() throws {
        let device = try SimulatedDevice.generate()
        var options = AssertionOptions()
        options.launchValidation = LaunchValidation(
            otherEntries: [CBORMapEntry(key: .textString(Self.category), value: .unsignedInteger(1))])
        let clientHash = SHA256.hash(Array("data".utf8))
        let assertion = try device.assertion(
            clientDataHash: clientHash, appID: SharedSimulator.appID, counter: 1, options: options)
        let error = #expect(throws: VerificationError.self) {
            try AssertionVerifier().verify(
                assertionObject: assertion, clientDataHash: clientHash,
                publicKey: try ECPublicKey(x962: device.publicKey), appIDs: [AppID(SharedSimulator.appID)],
                previousCounter: 0)
        }
        #expect(error?.code == .malformedLaunchValidation)
    }
}
