import Foundation
import GatewayTesting
import Simulator
import Testing
import Verification

@testable import Enforcement
@testable import KeyStore
@testable import PolicyModel

/// `android.apps[i].play_integrity` registered in the `android:` block (the app's package and
/// signing digests as defaults, errors naming file, line and field, the lint), and the
/// enrollment check that uses it (`AndroidEnrollmentVerifier`: token present, bound to the
/// challenge and the attested key, fresh, and accepted by the app's verdict policy).
@Suite struct AndroidPlayIntegrityPolicyTests {
    /// Key files from Play Console (test keys) in a directory of their own.
    struct Keys {
        let directory: TemporaryDirectory
        let keys: PlayIntegrityTestKeys
        var decryptionFile: String { self.directory.path + "/decrypt.b64" }
        var verificationFile: String { self.directory.path + "/verify.b64" }

        init() throws {
            self.directory = try TemporaryDirectory()
            self.keys = try PlayIntegrityTestKeys.generate()
            try (self.keys.decryptionKeyBase64 + "\n").write(
                toFile: self.decryptionFile, atomically: true, encoding: .utf8)
            try (self.keys.verificationKeyBase64 + "\n").write(
                toFile: self.verificationFile, atomically: true, encoding: .utf8)
        }

        /// The flow mapping of a `play_integrity:` block with these keys and `extra` keys.
        func block(_ extra: String = "") -> String {
            let keys =
                "decryption_keys: [{name: k1, key_file: \"\(self.decryptionFile)\"}], verification_keys: [{name: v1, key_file: \"\(self.verificationFile)\"}]"
            return "{\(keys)\(extra.isEmpty ? "" : ", " + extra)}"
        }

        /// The 1-based line of `play_integrity:` in `policy(_:)`.
        func playIntegrityLine(_ playIntegrity: String) -> Int {
            let lines = self.policy(playIntegrity).split(separator: "\n", omittingEmptySubsequences: false)
            return (lines.firstIndex { $0.contains("play_integrity:") } ?? -1) + 1
        }

        func policy(_ playIntegrity: String) -> String {
            AndroidPolicyTests.policy(
                """
                android:
                  apps:
                    - package: com.example.app
                      signing_digests: ["\(AndroidPolicyTests.digestHex)"]
                      play_integrity: \(playIntegrity)
                    - { package: com.example.other, signing_digests: ["\(AndroidPolicyTests.digestHex)"] }
                """)
        }
    }

    @Test func aPlayIntegrityBlockTakesTheAppsPackageAndDigests() throws {
        let keys = try Keys()
        let policy = try PolicyLoader.parse(keys.policy(keys.block("reverify_after: 24h")), sourcePath: "p.yaml")
        let apps = try #require(policy.android).apps
        let configuration = try #require(apps[0].playIntegrity)
        #expect(configuration.policy.packageName == "com.example.app")
        #expect(configuration.policy.certificateDigests == [[UInt8](repeating: 0xab, count: 32)])
        #expect(configuration.policy.deviceRequirement == .device)
        #expect(configuration.decryptionKeys.map(\.name) == ["k1"])
        #expect(configuration.verificationKeys.map(\.name) == ["v1"])
        #expect(configuration.reverifyAfter == .seconds(24 * 3600))
        // Optional per app: the other app asks for no verdict.
        #expect(apps[1].playIntegrity == nil)
    }

    @Test func theBlockMayNameTheAppsPackageButNoOther() throws {
        let keys = try Keys()
        let same = try PolicyLoader.parse(
            keys.policy(keys.block("package_name: com.example.app")), sourcePath: "p.yaml")
        #expect(same.android?.apps[0].playIntegrity?.policy.packageName == "com.example.app")
        #expect {
            _ = try PolicyLoader.parse(
                keys.policy(keys.block("package_name: com.example.other")), sourcePath: "p.yaml")
        } throws: { error in
            guard let error = error as? PolicyError else { return false }
            return error.code == .invalidValue && error.field == "android.apps[0].play_integrity.package_name"
                && error.line == keys.playIntegrityLine("x") && error.file == "p.yaml"
        }
    }

    @Test func errorsNameFileLineAndField() throws {
        let keys = try Keys()
        let cases: [(String, PolicyError.Code, String)] = [
            (keys.block("device_recognition: meets_everything"), .invalidValue, "device_recognition"),
            (keys.block("reverify_after: 10s"), .outOfRange, "reverify_after"),
            (keys.block("colour: blue"), .unknownKey, "colour"),
            (
                "{verification_keys: [{name: v1, key_file: \"\(keys.verificationFile)\"}]}", .missingKey,
                "decryption_keys"
            ),
            // The verification key file given as the decryption key: not 32 bytes of AES key.
            (
                "{decryption_keys: [{name: k1, key_file: \"\(keys.verificationFile)\"}], verification_keys: [{name: v1, key_file: \"\(keys.verificationFile)\"}]}",
                .invalidValue, "decryption_keys[0].key_file"
            ),
            ("yes", .wrongType, ""),
        ]
        for (block, code, field) in cases {
            do {
                _ = try PolicyLoader.parse(keys.policy(block), sourcePath: "p.yaml")
                Issue.record("accepted: \(block)")
            } catch {
                #expect(error.code == code, "\(block): \(error)")
                let expected = "android.apps[0].play_integrity" + (field.isEmpty ? "" : "." + field)
                #expect(error.field == expected, "\(block): \(error)")
                #expect(error.file == "p.yaml")
                #expect(error.line == keys.playIntegrityLine(block), "\(block): \(error)")
                #expect(error.line > 0)
            }
        }
    }

    /// `reverify_after` is enforced now: no lint says otherwise.
    @Test func reverifyAfterIsNoLongerWarnedAsNotEnforced() throws {
        let keys = try Keys()
        var warnings: [PolicyWarning] = []
        let policy = try PolicyLoader.parse(
            keys.policy(keys.block("reverify_after: 24h")), sourcePath: "p.yaml", warnings: &warnings)
        #expect(policy.android?.apps.first?.playIntegrity?.reverifyAfter == .seconds(24 * 3600))
        #expect(!warnings.map(\.code).contains("android_play_integrity_reverify_not_enforced"))
    }

    @Test func aRotatedKeyFileIsAChangedPolicy() throws {
        let keys = try Keys()
        let before = try PolicyLoader.parse(keys.policy(keys.block()), sourcePath: "p.yaml")
        let same = try PolicyLoader.parse(keys.policy(keys.block()), sourcePath: "p.yaml")
        #expect(before.android == same.android)
        let rotated = try PlayIntegrityTestKeys.generate()
        try rotated.decryptionKeyBase64.write(toFile: keys.decryptionFile, atomically: true, encoding: .utf8)
        let after = try PolicyLoader.parse(keys.policy(keys.block()), sourcePath: "p.yaml")
        #expect(before.android != after.android)
    }
}

/// The enrollment check with a verdict required, pure (`verify(_:at:)` takes the clock).
@Suite struct AndroidPlayIntegrityEnrollmentTests {
    static let challenge = "challenge-for-play-integrity"

    struct Fixture {
        let keys: AndroidPlayIntegrityPolicyTests.Keys
        let minter: PlayIntegrityMinter
        let verifier: AndroidEnrollmentVerifier
        let key: SimulatedAndroidKey
        let client: AndroidReferenceClient
        let spki: [UInt8]

        init(_ extra: String = "") throws {
            self.keys = try AndroidPlayIntegrityPolicyTests.Keys()
            self.minter = try PlayIntegrityMinter(keys: self.keys.keys)
            let digest = AndroidAttestationOptions.defaultSigningDigest.map { String(format: "%02x", $0) }.joined()
            let yaml = AndroidPolicyTests.policy(
                """
                android:
                  apps:
                    - package: com.example.app
                      signing_digests: ["\(digest)"]
                      play_integrity: \(self.keys.block(extra))
                """)
            var android = try #require(try PolicyLoader.parse(yaml, sourcePath: "p.yaml").android)
            let authority = try AndroidEnrollmentTests.authority.get()
            android.trustAnchorsPEM = [authority.rootCertificatePEM]
            // No status list in these tests (AndroidRevocationEnrollmentTests has them).
            android.revocation = nil
            self.verifier = try AndroidEnrollmentVerifier(policy: android)
            self.key = try authority.generateKey(challenge: Array(AndroidPlayIntegrityEnrollmentTests.challenge.utf8))
            self.client = AndroidReferenceClient(key: self.key)
            self.spki = try #require(self.client.subjectPublicKeyInfo)
        }

        func payload(challenge: String = AndroidPlayIntegrityEnrollmentTests.challenge, at time: Date = Date())
            -> PlayIntegrityPayload
        {
            PlayIntegrityMinter.goodPayload(
                packageName: "com.example.app",
                nonce: AndroidReferenceClient.playIntegrityNonce(challenge: challenge, attestedKeySPKI: self.spki),
                certificateDigest: AndroidAttestationOptions.defaultSigningDigest,
                timestampMillis: Int64(time.timeIntervalSince1970 * 1000))
        }

        func enroll(token: String?, at time: Date = Date()) throws -> Result<KeyRecord, EnforcementError> {
            let body = AndroidReferenceClient.enrollmentBody(
                challenge: AndroidPlayIntegrityEnrollmentTests.challenge, chain: self.key.chain,
                playIntegrityToken: token)
            return self.verifier.verify(try AndroidEnrollmentVerifier.parse(body), at: time)
        }
    }

    /// "code status" of a refusal, nil for an enrolled key.
    static func refusal(_ result: Result<KeyRecord, EnforcementError>) -> String? {
        if case .failure(let error) = result { return "\(error.code.rawValue) \(error.status)" }
        return nil
    }

    @Test func theReferenceClientsNonceIsTheGatewaysBinding() throws {
        let fixture = try Fixture()
        #expect(
            AndroidReferenceClient.playIntegrityNonce(challenge: Self.challenge, attestedKeySPKI: fixture.spki)
                == PlayIntegrityBinding.classicNonce(
                    challenge: Array(Self.challenge.utf8), attestedKeySPKI: fixture.spki))
        #expect(
            AndroidEnrollmentVerifier.keyID(subjectPublicKeyInfo: fixture.spki) == fixture.key.keyID)
    }

    @Test func aGoodVerdictEnrolls() throws {
        let fixture = try Fixture()
        let record = try fixture.enroll(token: try fixture.minter.mint(fixture.payload())).get()
        #expect(record.keyID == fixture.key.keyID)
        #expect(record.platform == KeyRecord.androidPlatform)
    }

    @Test func eachRefusalHasItsOwnCodeAndStatus() throws {
        let fixture = try Fixture()
        let minter = fixture.minter
        #expect(Self.refusal(try fixture.enroll(token: nil)) == "play_integrity_token_missing 400")
        // Minted for another challenge (and so another nonce).
        let other = try minter.mint(fixture.payload(challenge: "another-challenge"))
        #expect(Self.refusal(try fixture.enroll(token: other)) == "play_integrity_nonce_mismatch 401")
        // Bound right but only basic integrity: the default policy asks for device integrity.
        var basic = fixture.payload()
        basic.deviceIntegrity.deviceRecognitionVerdict = [.meetsBasicIntegrity]
        #expect(
            Self.refusal(try fixture.enroll(token: try minter.mint(basic)))
                == "play_integrity_device_integrity_insufficient 403")
        var unrecognized = fixture.payload()
        unrecognized.appIntegrity.appRecognitionVerdict = .unrecognizedVersion
        #expect(
            Self.refusal(try fixture.enroll(token: try minter.mint(unrecognized)))
                == "play_integrity_app_not_recognized 403")
        // The gateway's clock: ten minutes later the verdict is stale.
        let token = try minter.mint(fixture.payload())
        #expect(
            Self.refusal(try fixture.enroll(token: token, at: Date().addingTimeInterval(600)))
                == "play_integrity_stale 401")
        // Not a token, and a token under keys the app does not have.
        #expect(Self.refusal(try fixture.enroll(token: "not.a.token")) == "play_integrity_bad_format 400")
        let stranger = try PlayIntegrityMinter(keys: try PlayIntegrityTestKeys.generate())
        #expect(
            Self.refusal(try fixture.enroll(token: try stranger.mint(fixture.payload())))
                == "play_integrity_decryption_failed 401")
    }

    @Test func aVerdictIsCheckedOnlyAfterTheChain() throws {
        // A chain for another challenge is refused for its chain, whatever the token says.
        let fixture = try Fixture()
        let body = AndroidReferenceClient.enrollmentBody(
            challenge: "not-the-attested-challenge", chain: fixture.key.chain, playIntegrityToken: "x")
        let result = fixture.verifier.verify(try AndroidEnrollmentVerifier.parse(body), at: Date())
        #expect(Self.refusal(result) == "android_challenge_mismatch 401")
    }

    @Test func theTokenFieldIsAStringOfBoundedSize() throws {
        let fixture = try Fixture()
        let chain = fixture.key.chain.map { "\"\(Data($0).base64EncodedString())\"" }.joined(separator: ",")
        for token in ["42", "\"\"", "[\"a\"]", "\"\(String(repeating: "a", count: 16 * 1024 + 1))\""] {
            let body = Array(
                #"{"platform":"android","challenge":"c","certificate_chain":[\#(chain)],"play_integrity_token":\#(token)}"#
                    .utf8)
            #expect(throws: EnforcementError(.malformedRequest, "")) { try AndroidEnrollmentVerifier.parse(body) }
        }
        // An app without play_integrity ignores a token it did not ask for.
        let plain = try AndroidEnrollmentTests.verifier()
        let body = AndroidReferenceClient.enrollmentBody(
            challenge: AndroidEnrollmentTests.challenge,
            chain: try AndroidEnrollmentTests.authority.get().generateKey(
                challenge: Array(AndroidEnrollmentTests.challenge.utf8)
            ).chain, playIntegrityToken: "ignored")
        #expect(Self.refusal(plain.verify(try AndroidEnrollmentVerifier.parse(body), at: Date())) == nil)
    }

    @Test func everyPlayIntegrityCodeMapsToItsDocumentedStatus() throws {
        let doc = try Repository.read("docs/protocol.md")
        for code in PlayIntegrityError.allCodes {
            let mapped = EnforcementError.Code.playIntegrity(code)
            if code == .invalidKey {
                #expect(mapped == .internalError)
                continue
            }
            if code == .serviceAccountInvalid {
                #expect(mapped == .internalError)
                continue
            }
            #expect(mapped.rawValue == code.rawValue)
            let standardOnly: Set<PlayIntegrityError.Code> = [.unavailable, .quotaExhausted, .googleAnswerMalformed]
            #expect(standardOnly.contains(code) ? mapped.status == 503 : [400, 401, 403].contains(mapped.status))
            #expect(doc.contains("`\(code.rawValue)`"))
        }
        #expect(doc.contains("`\(EnforcementError.Code.playIntegrityTokenMissing.rawValue)`"))
        #expect(doc.contains("`play_integrity_token`"))
    }
}
