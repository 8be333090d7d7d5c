import Foundation
import Simulator
import Testing
import Verification

@testable import PolicyModel

/// `play_integrity:` decoded standalone (the Android app entry hooks it in): the keys read from
/// files and checked at load, the verdict policy, and every refusal naming file, line and field.
@Suite struct PlayIntegrityDecoderTests {
    struct Directory {
        let path: String
        let keys: PlayIntegrityTestKeys

        init() throws {
            self.path = FileManager.default.temporaryDirectory.appendingPathComponent("pi-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
            self.keys = try PlayIntegrityTestKeys.generate()
            try self.write(
                "decrypt.b64", "# Play Console, response encryption\n" + self.keys.decryptionKeyBase64 + "\n")
            try self.write("verify.b64", self.keys.verificationKeyBase64 + "\n")
            try self.write("short.b64", Data(count: 16).base64EncodedString())
        }

        func write(_ name: String, _ text: String) throws {
            try Data(text.utf8).write(to: URL(fileURLWithPath: self.path).appendingPathComponent(name))
        }

        func decode(
            _ yaml: String, packageName: String? = nil, certificateDigests: Set<[UInt8]> = []
        ) throws(PolicyError) -> PlayIntegrityConfiguration {
            let root = try YAMLReader.read(Array(yaml.utf8), sourcePath: "policies.yaml")
            let reader = PolicyScalarReader(file: "policies.yaml")
            let top = try reader.mapping(root, keys: ["play_integrity"])
            guard let node = top["play_integrity"] else {
                throw PolicyError(code: .missingKey, file: "policies.yaml", line: 0, column: 0, field: "", message: "")
            }
            return try PlayIntegrityDecoder(
                reader: reader, files: PolicyFilePath(reader: reader, baseDirectory: self.path)
            ).decode(node, packageName: packageName, certificateDigests: certificateDigests)
        }

        func error(_ yaml: String) -> PolicyError? {
            do {
                _ = try self.decode(yaml)
                return nil
            } catch {
                return error
            }
        }
    }

    static let digestHex =
        "85:B2:0F:71:91:DA:04:3C:ED:FE:02:CF:1E:67:BC:54:21:15:85:10:73:1F:EF:49:27:A2:49:76:8C:BE:D0:4C"

    static let full = """
        play_integrity:
          package_name: com.example.app
          certificate_digests:
            - "\(digestHex)"
            - BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc
          decryption_keys:
            - {name: "2026-10", key_file: decrypt.b64}
          verification_keys:
            - {name: v1, key_file: verify.b64}
          app_recognition: play_recognized
          device_recognition: meets_strong_integrity
          require_licensed: true
          max_device_activity_level: 2
          max_age: 2m
          clock_skew: 30s
          reverify_after: 168h
        """

    @Test func aFullBlockDecodesAndItsVerifierAcceptsAMintedToken() throws {
        let directory = try Directory()
        // Two digests: the release key (hex with colons) and another (base64url), 32 bytes of 7.
        let configuration = try directory.decode(Self.full)
        let policy = configuration.policy
        #expect(policy.packageName == "com.example.app")
        #expect(policy.certificateDigests.count == 2)
        #expect(policy.certificateDigests.contains(PlayIntegrityPolicy.digestBytes(Self.digestHex) ?? []))
        #expect(policy.deviceRequirement == .strong && policy.requireLicensed && policy.requirePlayRecognized)
        #expect(policy.maximumDeviceActivityLevel == 2)
        #expect(policy.maximumAgeSeconds == 120 && policy.clockSkewSeconds == 30)
        #expect(configuration.reverifyAfter == .seconds(168 * 3600))
        #expect(configuration.decryptionKeys.map(\.name) == ["2026-10"])
        #expect(configuration.verificationKeys.map(\.name) == ["v1"])

        let now: Int64 = 1_800_000_000_000
        let nonce = PlayIntegrityBinding.classicNonce(challenge: Array("c".utf8), attestedKeySPKI: [1, 2, 3])
        var payload = PlayIntegrityMinter.goodPayload(
            packageName: "com.example.app", nonce: nonce,
            certificateDigest: PlayIntegrityPolicy.digestBytes(Self.digestHex) ?? [], timestampMillis: now - 1000)
        payload.deviceIntegrity.deviceRecognitionVerdict = [.meetsDeviceIntegrity, .meetsStrongIntegrity]
        let token = try PlayIntegrityMinter(keys: directory.keys).mint(payload)
        let verdict = try configuration.verifier.verify(token: token, expectedNonce: nonce, nowMillis: now)
        #expect(verdict.decryptionKeyName == "2026-10" && verdict.verificationKeyName == "v1")
    }

    @Test func defaultsAndTheAppEntrysPackageAndDigests() throws {
        let directory = try Directory()
        let digest = [UInt8](repeating: 7, count: 32)
        let configuration = try directory.decode(
            """
            play_integrity:
              decryption_keys: [{name: a, key_file: decrypt.b64}]
              verification_keys: [{name: b, key_file: verify.b64}]
            """, packageName: "com.example.entry", certificateDigests: [digest])
        let policy = configuration.policy
        #expect(policy.packageName == "com.example.entry" && policy.certificateDigests == [digest])
        #expect(policy.deviceRequirement == .device && policy.requirePlayRecognized && !policy.requireLicensed)
        #expect(policy.maximumDeviceActivityLevel == nil && configuration.reverifyAfter == nil)
        #expect(policy.maximumAgeSeconds == 300 && policy.clockSkewSeconds == 60)
        let any = try directory.decode(
            """
            play_integrity:
              package_name: com.example.app
              certificate_digests: ["\(Self.digestHex)"]
              decryption_keys: [{name: a, key_file: decrypt.b64}]
              verification_keys: [{name: b, key_file: verify.b64}]
              app_recognition: any
            """)
        #expect(!any.policy.requirePlayRecognized)
    }

    /// Each refusal: its code, the line of the offending node (of the block, line 2, for a missing
    /// key) and the field path.
    @Test func refusalsNameLineAndField() throws {
        let directory = try Directory()
        let head = """
            play_integrity:
              package_name: com.example.app
              certificate_digests: ["\(Self.digestHex)"]

            """
        let keys = """
              decryption_keys: [{name: a, key_file: decrypt.b64}]
              verification_keys: [{name: b, key_file: verify.b64}]

            """
        let cases: [(yaml: String, code: PolicyError.Code, line: Int, field: String, says: String)] = [
            (head + keys + "  max_agee: 5m\n", .unknownKey, 6, "play_integrity.max_agee", "did you mean \"max_age\""),
            (
                head + "  verification_keys: [{name: b, key_file: verify.b64}]\n", .missingKey, 2,
                "play_integrity.decryption_keys", "decryption_keys"
            ),
            (
                "play_integrity:\n  package_name: example\n" + keys, .invalidValue, 2, "play_integrity.package_name",
                "Android package name"
            ),
            (
                "play_integrity:\n  package_name: com.example.app\n  certificate_digests: [abc]\n" + keys,
                .invalidValue, 3,
                "play_integrity.certificate_digests[0]", "SHA-256 digest"
            ),
            (
                "play_integrity:\n  package_name: com.example.app\n" + keys, .missingKey, 2,
                "play_integrity.certificate_digests", "certificate_digests"
            ),
            (
                head
                    + "  decryption_keys: [{name: a, key_file: missing.b64}]\n  verification_keys: [{name: b, key_file: verify.b64}]\n",
                .tlsFileUnreadable, 4, "play_integrity.decryption_keys[0].key_file", "not found"
            ),
            (
                head
                    + "  decryption_keys: [{name: a, key_file: short.b64}]\n  verification_keys: [{name: b, key_file: verify.b64}]\n",
                .invalidValue, 4, "play_integrity.decryption_keys[0].key_file", "16 bytes, not 32"
            ),
            (
                head
                    + "  decryption_keys: [{name: a, key_file: decrypt.b64}]\n  verification_keys: [{name: b, key_file: decrypt.b64}]\n",
                .invalidValue, 5, "play_integrity.verification_keys[0].key_file", "not a P-256 public key"
            ),
            (
                head + "  decryption_keys: [{name: a, key_file: decrypt.b64}, {name: a, key_file: decrypt.b64}]\n"
                    + "  verification_keys: [{name: b, key_file: verify.b64}]\n", .invalidValue, 4,
                "play_integrity.decryption_keys[1].name", "listed twice"
            ),
            (
                head + "  decryption_keys: [{name: a}]\n  verification_keys: [{name: b, key_file: verify.b64}]\n",
                .missingKey, 4, "play_integrity.decryption_keys[0].key_file", "key_file is missing"
            ),
            (
                head + "  decryption_keys: []\n  verification_keys: [{name: b, key_file: verify.b64}]\n", .outOfRange,
                4,
                "play_integrity.decryption_keys", "1 to 8 keys"
            ),
            (
                head + keys + "  device_recognition: meets_device\n", .invalidValue, 6,
                "play_integrity.device_recognition",
                "meets_basic_integrity, meets_device_integrity, meets_strong_integrity"
            ),
            (
                head + keys + "  max_device_activity_level: 5\n", .outOfRange, 6,
                "play_integrity.max_device_activity_level", "from 1 to 4"
            ),
            (head + keys + "  max_age: 2h\n", .outOfRange, 6, "play_integrity.max_age", "1s to 1h"),
            (
                head + keys + "  require_licensed: yes please\n", .wrongType, 6, "play_integrity.require_licensed",
                "true or false"
            ),
            (head + keys + "  reverify_after: 1000h\n", .outOfRange, 6, "play_integrity.reverify_after", "720h"),
            (
                head + keys + "  reverify_after: soon\n", .invalidDuration, 6, "play_integrity.reverify_after",
                "1m to 720h"
            ),
        ]
        for (index, testCase) in cases.enumerated() {
            let error = directory.error(testCase.yaml)
            #expect(error?.code == testCase.code, "case \(index): \(error?.description ?? "no error")")
            #expect(error?.line == testCase.line, "case \(index): \(error?.description ?? "no error")")
            #expect(error?.field == testCase.field, "case \(index): \(error?.description ?? "no error")")
            #expect(
                error?.message.contains(testCase.says) == true, "case \(index): \(error?.description ?? "no error")")
            #expect(error?.description.hasPrefix("policies.yaml:\(testCase.line):") == true, "case \(index)")
        }
    }

    @Test func packageNames() {
        for good in ["com.example.app", "a.b", "com.Example_1.app2"] {
            #expect(PlayIntegrityDecoder.isPackageName(good), "\(good)")
        }
        for bad in ["", "com", "com..app", ".com.app", "com.1app", "com.exa-mple", "com.app.", "com.é.app"] {
            #expect(!PlayIntegrityDecoder.isPackageName(bad), "\(bad)")
        }
    }
}
