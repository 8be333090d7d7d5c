import Foundation
import Simulator
import Testing

@testable import Verification

/// macOS 27's key access-control extension (OID 1.2.840.113635.100.8.6): Apple's Full
/// Security + SIP blob, any other blob, other shapes, and its absence.
@Suite struct KeyAccessPolicyTests {
    /// Apple's documented value, as base64 (the simulator carries the same constant separately).
    static let appleBlobBase64 =
        "MEAMAjExMDowCQwCb2uhAwEB/zAJDAJvYaEDAQH/MAsMBG9kZWyhAwEB/zAVDARvc2duoAYMBHJzZWMwBaYDAgEB"

    static func wrapped(_ blob: [UInt8], tag: UInt8 = 0xa3) -> [UInt8] {
        let octets = [0x04, UInt8(blob.count)] + blob
        let tagged = [tag, UInt8(octets.count)] + octets
        return [0x30, UInt8(tagged.count)] + tagged
    }

    @Test func theVerifiersConstantIsApplesBlob() throws {
        let apple = try #require(Data(base64Encoded: Self.appleBlobBase64))
        #expect(KeyAccessPolicy.macOSFullSecurityBlob == Array(apple))
        #expect(KeyAccessPolicyBlob.macOSFullSecurity == Array(apple))
    }

    @Test func exactBlobIsFullSecurity() {
        let der = Self.wrapped(KeyAccessPolicy.macOSFullSecurityBlob)
        #expect(der.prefix(6) == [0x30, 0x46, 0xa3, 0x44, 0x04, 0x42])
        #expect(KeyAccessPolicy(extensionValue: der) == .macOSFullSecurity)
    }

    @Test func anythingElseIsOther() {
        let blob = KeyAccessPolicy.macOSFullSecurityBlob
        var flipped = blob
        flipped[flipped.count - 1] = 0x00  // the secure-boot requirement's level changed
        let cases: [[UInt8]] = [
            Self.wrapped(KeyAccessPolicyBlob.reducedSecurity),
            Self.wrapped(flipped),
            Self.wrapped(blob, tag: 0xa1),  // the nonce's shape, not [3]
            Self.wrapped(blob) + [0x00],  // trailing byte
            Array(Self.wrapped(blob).dropLast()),  // truncated
            Self.wrapped(blob + [0x00]),  // extra byte inside
            [],
        ]
        for der in cases {
            #expect(KeyAccessPolicy(extensionValue: der) == .other, "\(der.prefix(8).hexString)")
        }
    }

    @Test(arguments: [
        (KeyAccessPolicyBlob.macOSFullSecurity, KeyAccessPolicy.macOSFullSecurity),
        (KeyAccessPolicyBlob.reducedSecurity, KeyAccessPolicy.other),
    ])
    func simulatedMacAttestationReportsItsPolicy(blob: [UInt8], expected: KeyAccessPolicy) throws {
        let device = try SimulatedDevice.generate()
        var options = AttestationOptions()
        options.time = SharedSimulator.time
        options.keyAccessPolicyBlob = blob
        let hash = SHA256.hash(Array("challenge".utf8))
        let attestation = try SharedSimulator.authority.attestation(
            for: device, appID: SharedSimulator.appID, clientDataHash: hash, environment: .production,
            options: options)
        let key = try SharedSimulator.attestationVerifier().verify(
            attestationObject: attestation, keyID: device.keyID, clientDataHash: hash, at: SharedSimulator.time)
        #expect(key.keyAccessPolicy == expected)
    }

    @Test func withoutTheExtensionNothingIsReported() throws {
        let device = try SimulatedDevice.generate()
        var options = AttestationOptions()
        options.time = SharedSimulator.time
        let hash = SHA256.hash(Array("challenge".utf8))
        let attestation = try SharedSimulator.authority.attestation(
            for: device, appID: SharedSimulator.appID, clientDataHash: hash, environment: .production,
            options: options)
        let key = try SharedSimulator.attestationVerifier().verify(
            attestationObject: attestation, keyID: device.keyID, clientDataHash: hash, at: SharedSimulator.time)
        #expect(key.keyAccessPolicy == nil)
    }

    /// Apple's real iOS attestations still verify, whatever they carry under this OID, and none
    /// passes for a Mac in Full Security mode; what each carries is printed.
    @Test func realVectorsStillVerify() throws {
        for vector in try AttestationVector.all() where vector.expected_result == "valid" {
            let requirement = try #require(EnvironmentRequirement(rawValue: vector.required_environment ?? "any"))
            let verifier = try AttestationVerifier(appIDs: [vector.app_id], environment: requirement)
            let key = try verifier.verify(
                attestationObject: try VectorFixtures.base64(vector.attestation),
                keyID: try VectorFixtures.base64(vector.key_id),
                clientDataHash: try VectorFixtures.base64(vector.client_data_hash),
                at: try VectorFixtures.date(vector.valid_at))
            print("vector \(vector.id): key access policy \(key.keyAccessPolicy?.rawValue ?? "absent")")
            #expect(key.keyAccessPolicy != .macOSFullSecurity, "\(vector.id) is an iOS device")
        }
    }
}
