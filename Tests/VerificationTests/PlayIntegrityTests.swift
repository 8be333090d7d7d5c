import Foundation
import Simulator
import Testing

@testable import Verification

/// Play Integrity classic tokens: minted by the simulator exactly as Google's servers do (ES256
/// inside A256KW + A256GCM), verified by `PlayIntegrityVerifier`; every refusal code, key
/// rotation, and the envelope attacks (another alg or enc, tampered parts, truncation, size).
@Suite struct PlayIntegrityTests {
    static let packageName = "com.example.app"
    static let nowMillis: Int64 = 1_800_000_000_000
    static let certificateDigest = Array(SHA256.hash(Array("signing cert".utf8)))
    static let nonce = PlayIntegrityBinding.classicNonce(
        challenge: Array("ch-7Yk2dPq".utf8), attestedKeySPKI: Array(0..<91).map { UInt8($0) })

    struct Fixture {
        let keys: PlayIntegrityTestKeys
        let minter: PlayIntegrityMinter
        let verifier: PlayIntegrityVerifier

        init(policy: PlayIntegrityPolicy = PlayIntegrityTests.policy()) throws {
            self.keys = try PlayIntegrityTestKeys.generate()
            self.minter = try PlayIntegrityMinter(keys: self.keys)
            self.verifier = PlayIntegrityVerifier(
                decryptionKeys: [
                    try PlayIntegrityDecryptionKey(name: "current", base64: self.keys.decryptionKeyBase64)
                ],
                verificationKeys: [
                    try PlayIntegrityVerificationKey(name: "current", base64SPKI: self.keys.verificationKeyBase64)
                ],
                policy: policy)
        }

        func mint(_ edit: (inout PlayIntegrityPayload) -> Void = { _ in }) throws -> String {
            var payload = PlayIntegrityTests.goodPayload()
            edit(&payload)
            return try self.minter.mint(payload)
        }

        func verify(_ token: String, nonce: String = PlayIntegrityTests.nonce) throws(PlayIntegrityError)
            -> PlayIntegrityVerdict
        {
            try self.verifier.verify(token: token, expectedNonce: nonce, nowMillis: PlayIntegrityTests.nowMillis)
        }
    }

    static func policy(
        device: PlayIntegrityPolicy.DeviceRequirement = .device, requireLicensed: Bool = true,
        maximumActivity: Int? = 2
    ) -> PlayIntegrityPolicy {
        PlayIntegrityPolicy(
            packageName: Self.packageName, certificateDigests: [Self.certificateDigest], deviceRequirement: device,
            requireLicensed: requireLicensed, maximumDeviceActivityLevel: maximumActivity, maximumAgeSeconds: 120)
    }

    static func goodPayload() -> PlayIntegrityPayload {
        PlayIntegrityMinter.goodPayload(
            packageName: Self.packageName, nonce: Self.nonce, certificateDigest: Self.certificateDigest,
            timestampMillis: Self.nowMillis - 5_000)
    }

    /// The code of the `PlayIntegrityError` `body` throws; nil when it throws nothing.
    static func code(_ body: () throws(PlayIntegrityError) -> Void) -> PlayIntegrityError.Code? {
        do {
            try body()
            return nil
        } catch {
            return error.code
        }
    }

    static func code(_ fixture: Fixture, _ token: String, nonce: String = nonce) -> PlayIntegrityError.Code? {
        Self.code { () throws(PlayIntegrityError) in _ = try fixture.verify(token, nonce: nonce) }
    }

    // MARK: - Round trip

    @Test func aGoodTokenVerifiesAndDecodesEveryField() throws {
        let fixture = try Fixture()
        let verdict = try fixture.verify(try fixture.mint())
        let payload = verdict.payload
        #expect(payload.requestDetails.requestPackageName == Self.packageName)
        #expect(payload.requestDetails.nonce == Self.nonce)
        #expect(payload.requestDetails.timestampMillis == Self.nowMillis - 5_000)
        #expect(payload.appIntegrity.appRecognitionVerdict == .playRecognized)
        #expect(payload.appIntegrity.versionCode == 42)
        #expect(payload.appIntegrity.certificateSha256Digest == [Base64URL.encode(Self.certificateDigest)])
        #expect(payload.deviceIntegrity.deviceRecognitionVerdict == [.meetsDeviceIntegrity])
        #expect(payload.deviceIntegrity.recentDeviceActivity?.deviceActivityLevel == .level1)
        #expect(payload.accountDetails?.appLicensingVerdict == .licensed)
        #expect(payload.environmentDetails?.playProtectVerdict == "NO_ISSUES")
        #expect(verdict.decryptionKeyName == "current" && verdict.verificationKeyName == "current")
        #expect(verdict.strongestDeviceLabel == .meetsDeviceIntegrity)
    }

    /// Google writes 64-bit integers as strings; numbers are read too, anything else is malformed.
    @Test func timestampsAndVersionCodesAsStringsOrNumbers() throws {
        let fixture = try Fixture()
        let base = String(decoding: try PlayIntegrityMinter.json(Self.goodPayload()), as: UTF8.self)
        let stamp = "\"\(Self.nowMillis - 5_000)\""
        #expect(base.contains(stamp) && base.contains(#""versionCode":"42""#))
        let asNumbers = base.replacingOccurrences(of: stamp, with: String(Self.nowMillis - 5_000))
            .replacingOccurrences(of: #""versionCode":"42""#, with: #""versionCode":42"#)
        let verdict = try fixture.verify(try fixture.minter.mint(payloadJSON: Array(asNumbers.utf8)))
        #expect(verdict.payload.appIntegrity.versionCode == 42)
        for bad in ["\"-5\"", "\"12a\"", "\"\"", "\"1234567890123456789\"", "-5", "true"] {
            let json = base.replacingOccurrences(of: stamp, with: bad)
            #expect(
                Self.code(fixture, try fixture.minter.mint(payloadJSON: Array(json.utf8))) == .payloadMalformed,
                "timestampMillis \(bad)")
        }
    }

    @Test func anEnrollmentNonceIsSHA256OfChallengeAndKeyDigest() {
        // python3: base64.urlsafe_b64encode(sha256(c + sha256(spki).digest()).digest()).rstrip(b'=')
        #expect(Self.nonce == "40k5HKh1iWODL9pPKUlMIEI2i8g5q5yyHHSTeauHSHY")
        #expect(
            PlayIntegrityBinding.enrollment(challenge: Array("ch-7Yk2dPq".utf8), attestedKeySPKI: Array(0..<91))
                == .nonce(Self.nonce))
        let otherKey = PlayIntegrityBinding.classicNonce(
            challenge: Array("ch-7Yk2dPq".utf8), attestedKeySPKI: Array(1..<92))
        #expect(otherKey != Self.nonce)
    }

    /// Android's `Base64.URL_SAFE | NO_WRAP` pads with `=`: the padded spelling is the same nonce.
    @Test func aPaddedNonceIsAccepted() throws {
        let fixture = try Fixture()
        _ = try fixture.verify(try fixture.mint { $0.requestDetails.nonce = Self.nonce + "=" })
        #expect(Self.code(fixture, try fixture.mint { $0.requestDetails.nonce = Self.nonce + "===" }) == .nonceMismatch)
    }

    // MARK: - Key rotation

    @Test func rotatedKeysAreTriedInOrderAndReported() throws {
        let old = try PlayIntegrityMinter(keys: try PlayIntegrityTestKeys.generate())
        let current = try PlayIntegrityMinter(keys: try PlayIntegrityTestKeys.generate())
        let verifier = PlayIntegrityVerifier(
            decryptionKeys: [
                try PlayIntegrityDecryptionKey(name: "2026-10", bytes: current.keys.decryptionKey),
                try PlayIntegrityDecryptionKey(name: "2026-04", bytes: old.keys.decryptionKey),
            ],
            verificationKeys: [
                try PlayIntegrityVerificationKey(name: "v2", base64SPKI: current.keys.verificationKeyBase64),
                try PlayIntegrityVerificationKey(name: "v1", base64SPKI: old.keys.verificationKeyBase64),
            ],
            policy: Self.policy())
        let fromOld = try verifier.verify(
            token: try old.mint(Self.goodPayload()), expectedNonce: Self.nonce, nowMillis: Self.nowMillis)
        #expect(fromOld.decryptionKeyIndex == 1 && fromOld.decryptionKeyName == "2026-04")
        #expect(fromOld.verificationKeyIndex == 1 && fromOld.verificationKeyName == "v1")
        let fromCurrent = try verifier.verify(
            token: try current.mint(Self.goodPayload()), expectedNonce: Self.nonce, nowMillis: Self.nowMillis)
        #expect(fromCurrent.decryptionKeyIndex == 0 && fromCurrent.verificationKeyIndex == 0)

        // Encrypted under the current key but signed by a key nobody configured.
        let stranger = try PlayIntegrityMinter(
            keys: try PlayIntegrityTestKeys(
                decryptionKey: current.keys.decryptionKey,
                signingKeyPEM: try PlayIntegrityTestKeys.generate().signingKeyPEM))
        let signedByStranger = try stranger.mint(Self.goodPayload())
        #expect(
            Self.code { () throws(PlayIntegrityError) in
                _ = try verifier.verify(token: signedByStranger, expectedNonce: Self.nonce, nowMillis: Self.nowMillis)
            } == .signatureInvalid)
        let encryptedForStranger = try PlayIntegrityMinter(keys: try PlayIntegrityTestKeys.generate())
            .mint(Self.goodPayload())
        #expect(
            Self.code { () throws(PlayIntegrityError) in
                _ = try verifier.verify(
                    token: encryptedForStranger, expectedNonce: Self.nonce, nowMillis: Self.nowMillis)
            } == .decryptionFailed)
    }

    @Test func keysAreCheckedWhenLoaded() throws {
        #expect(
            Self.code { () throws(PlayIntegrityError) in
                _ = try PlayIntegrityDecryptionKey(name: "short", base64: Data(count: 16).base64EncodedString())
            } == .invalidKey)
        #expect(
            Self.code { () throws(PlayIntegrityError) in
                _ = try PlayIntegrityDecryptionKey(name: "text", base64: "not base64!")
            } == .invalidKey)
        #expect(
            Self.code { () throws(PlayIntegrityError) in
                _ = try PlayIntegrityVerificationKey(name: "aes", base64SPKI: Data(count: 32).base64EncodedString())
            } == .invalidKey)
        let keys = try PlayIntegrityTestKeys.generate()
        _ = try PlayIntegrityDecryptionKey(name: "nl", base64: keys.decryptionKeyBase64 + "\n")
        let pem =
            "-----BEGIN PUBLIC KEY-----\n"
            + Data(keys.verificationKeySPKI).base64EncodedString(options: [.lineLength64Characters])
            + "\n-----END PUBLIC KEY-----\n"
        let fromPEM = try PlayIntegrityVerificationKey(name: "pem", base64SPKI: pem)
        #expect(fromPEM.key.x962 == Array(keys.verificationKeySPKI.suffix(65)))
    }

    // MARK: - Refusals on an authentic verdict

    @Test func theBindingAndFreshnessAreChecked() throws {
        let fixture = try Fixture()
        let token = try fixture.mint()
        let otherNonce = PlayIntegrityBinding.classicNonce(
            challenge: Array("another challenge".utf8), attestedKeySPKI: Array(0..<91))
        #expect(Self.code(fixture, token, nonce: otherNonce) == .nonceMismatch)
        #expect(Self.code(fixture, try fixture.mint { $0.requestDetails.nonce = nil }) == .nonceMismatch)
        #expect(
            Self.code { () throws(PlayIntegrityError) in
                _ = try fixture.verifier.verify(token: token, expectedRequestHash: "aGFzaA", nowMillis: Self.nowMillis)
            } == .requestHashMismatch)
        let hashed = try fixture.mint { $0.requestDetails.requestHash = "aGFzaA" }
        _ = try fixture.verifier.verify(token: hashed, expectedRequestHash: "aGFzaA", nowMillis: Self.nowMillis)
        #expect(
            Self.code { () throws(PlayIntegrityError) in
                _ = try fixture.verifier.verify(token: hashed, expectedRequestHash: "aGFzaB", nowMillis: Self.nowMillis)
            } == .requestHashMismatch)

        // 120 s is the policy's maximum age; 60 s the skew.
        _ = try fixture.verify(try fixture.mint { $0.requestDetails.timestampMillis = Self.nowMillis - 120_000 })
        #expect(
            Self.code(fixture, try fixture.mint { $0.requestDetails.timestampMillis = Self.nowMillis - 120_001 })
                == .stale)
        _ = try fixture.verify(try fixture.mint { $0.requestDetails.timestampMillis = Self.nowMillis + 60_000 })
        #expect(
            Self.code(fixture, try fixture.mint { $0.requestDetails.timestampMillis = Self.nowMillis + 60_001 })
                == .stale)
        #expect(Self.code(fixture, try fixture.mint { $0.requestDetails.timestampMillis = 0 }) == .stale)
    }

    @Test func theAppIsChecked() throws {
        let fixture = try Fixture()
        #expect(
            Self.code(fixture, try fixture.mint { $0.requestDetails.requestPackageName = "com.example.other" })
                == .packageMismatch)
        #expect(
            Self.code(fixture, try fixture.mint { $0.appIntegrity.packageName = "com.example.other" })
                == .packageMismatch)
        #expect(
            Self.code(
                fixture,
                try fixture.mint {
                    $0.appIntegrity.certificateSha256Digest = [Base64URL.encode(SHA256.hash(Array("other".utf8)))]
                }) == .certificateMismatch)
        #expect(
            Self.code(fixture, try fixture.mint { $0.appIntegrity.certificateSha256Digest = [] })
                == .certificateMismatch)
        // One matching digest among several (a rotated signing key) is enough.
        _ = try fixture.verify(
            try fixture.mint {
                $0.appIntegrity.certificateSha256Digest = [
                    Base64URL.encode(SHA256.hash(Array("old".utf8))), Base64URL.encode(Self.certificateDigest),
                ]
            })
        for verdict in [AppRecognitionVerdict.unrecognizedVersion, .unevaluated, .init(rawValue: "NEW_VALUE")] {
            #expect(
                Self.code(fixture, try fixture.mint { $0.appIntegrity.appRecognitionVerdict = verdict })
                    == .appNotRecognized, "\(verdict)")
        }
    }

    @Test func theDeviceAndAccountAreChecked() throws {
        let fixture = try Fixture()
        for labels in [[], [DeviceRecognitionLabel.meetsBasicIntegrity], [.meetsVirtualIntegrity]] {
            #expect(
                Self.code(fixture, try fixture.mint { $0.deviceIntegrity.deviceRecognitionVerdict = labels })
                    == .deviceIntegrityInsufficient, "\(labels)")
        }
        _ = try fixture.verify(
            try fixture.mint {
                $0.deviceIntegrity.deviceRecognitionVerdict = [.meetsBasicIntegrity, .meetsStrongIntegrity]
            })
        let strong = try Fixture(policy: Self.policy(device: .strong))
        #expect(
            Self.code(strong, try strong.mint { $0.deviceIntegrity.deviceRecognitionVerdict = [.meetsDeviceIntegrity] })
                == .deviceIntegrityInsufficient)
        _ = try strong.verify(try strong.mint { $0.deviceIntegrity.deviceRecognitionVerdict = [.meetsStrongIntegrity] })

        #expect(
            Self.code(fixture, try fixture.mint { $0.accountDetails = .init(appLicensingVerdict: .unlicensed) })
                == .notLicensed)
        #expect(Self.code(fixture, try fixture.mint { $0.accountDetails = nil }) == .notLicensed)
        let unlicensedAllowed = try Fixture(policy: Self.policy(requireLicensed: false))
        _ = try unlicensedAllowed.verify(
            try unlicensedAllowed.mint { $0.accountDetails = .init(appLicensingVerdict: .unlicensed) })

        #expect(
            Self.code(
                fixture,
                try fixture.mint { $0.deviceIntegrity.recentDeviceActivity = .init(deviceActivityLevel: .level3) })
                == .deviceActivityExceeded)
        #expect(
            Self.code(
                fixture,
                try fixture.mint { $0.deviceIntegrity.recentDeviceActivity = .init(deviceActivityLevel: .unevaluated) })
                == .deviceActivityExceeded)
        #expect(
            Self.code(fixture, try fixture.mint { $0.deviceIntegrity.recentDeviceActivity = nil })
                == .deviceActivityExceeded)
        _ = try fixture.verify(
            try fixture.mint { $0.deviceIntegrity.recentDeviceActivity = .init(deviceActivityLevel: .level2) })
        let unbounded = try Fixture(policy: Self.policy(maximumActivity: nil))
        _ = try unbounded.verify(
            try unbounded.mint { $0.deviceIntegrity.recentDeviceActivity = .init(deviceActivityLevel: .level4) })
    }

    @Test func aPayloadThatIsNotGooglesIsMalformed() throws {
        let fixture = try Fixture()
        for json in [
            "[]", "{}", "not json", #"{"requestDetails":{}}"#,
            #"{"requestDetails":{"requestPackageName":"com.example.app","timestampMillis":"1"},"appIntegrity":{},"deviceIntegrity":{}}"#,
        ] {
            #expect(
                Self.code(fixture, try fixture.minter.mint(payloadJSON: Array(json.utf8))) == .payloadMalformed,
                "\(json)")
        }
    }

    // MARK: - The envelopes

    /// `token` with part `index` replaced by the base64url of `edit(decoded part)`.
    static func editPart(_ token: String, _ index: Int, _ edit: (inout [UInt8]) -> Void) -> String {
        var parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var bytes = Base64URL.decode(Array(parts[index].utf8)) ?? []
        edit(&bytes)
        parts[index] = Base64URL.encode(bytes)
        return parts.joined(separator: ".")
    }

    @Test func aJWEHeaderOtherThanA256KWAndA256GCMIsRefused() throws {
        let fixture = try Fixture()
        let token = try fixture.mint()
        for header in [
            #"{"alg":"RSA-OAEP-256","enc":"A256GCM"}"#, #"{"alg":"dir","enc":"A256GCM"}"#,
            #"{"alg":"A128KW","enc":"A256GCM"}"#, #"{"alg":"A256KW","enc":"A128GCM"}"#,
            #"{"alg":"A256KW","enc":"A256CBC-HS512"}"#, #"{"alg":"A256KW","enc":"A256GCM","zip":"DEF"}"#,
            #"{"alg":"A256KW","enc":"A256GCM","crit":["exp"]}"#,
        ] {
            #expect(
                Self.code(fixture, Self.editPart(token, 0) { $0 = Array(header.utf8) }) == .unsupportedAlgorithm,
                "\(header)")
        }
        for header in [#"{"alg":"A256KW"}"#, #"{"alg":1,"enc":"A256GCM"}"#, "[]", "A256KW"] {
            #expect(Self.code(fixture, Self.editPart(token, 0) { $0 = Array(header.utf8) }) == .badFormat, "\(header)")
        }
        // Same alg and enc, other header bytes: the header is the GCM AAD, so the tag fails.
        let rewritten = Self.editPart(token, 0) { $0 = Array(#"{"enc":"A256GCM","alg":"A256KW"}"#.utf8) }
        #expect(Self.code(fixture, rewritten) == .decryptionFailed)
    }

    @Test func tamperedPartsFailDecryption() throws {
        let fixture = try Fixture()
        let token = try fixture.mint()
        for index in 1...4 {
            for position in [0, -1] {
                let tampered = Self.editPart(token, index) { bytes in
                    let at = position >= 0 ? position : bytes.count - 1
                    bytes[at] ^= 0x01
                }
                #expect(Self.code(fixture, tampered) == .decryptionFailed, "part \(index) byte \(position)")
            }
        }
    }

    @Test func truncatedMalformedAndOversizedTokensAreBadFormat() throws {
        let fixture = try Fixture()
        let token = try fixture.mint()
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        let cases: [String] = [
            "", ".", "....", parts.prefix(4).joined(separator: "."), token + ".", token + ".AAAA",
            parts[0] + "..." + parts[3] + "." + parts[4],
            Self.editPart(token, 4) { $0.removeLast() },  // 15-byte tag (CVE-2023-37464's truncated tag)
            Self.editPart(token, 4) { $0 = Array($0.prefix(1)) },
            Self.editPart(token, 2) { $0.removeLast() },  // 11-byte IV
            Self.editPart(token, 1) { $0.removeLast(8) },  // a 32-byte "wrapped" key
            token.replacingOccurrences(of: ".", with: "=."),  // padding
            token.replacingOccurrences(of: "-", with: "+"),
            String(token.dropLast()),  // non-canonical last character or wrong length
            token + String(repeating: "A", count: PlayIntegrityJWE.maximumBytes),
            " " + token,
        ]
        for (index, text) in cases.enumerated() where text != token {
            #expect(Self.code(fixture, text) == .badFormat, "case \(index)")
        }
    }

    @Test func anInnerJWSOtherThanES256IsRefused() throws {
        let fixture = try Fixture()
        let payload = Base64URL.encode(try PlayIntegrityMinter.json(Self.goodPayload()))
        func header(_ json: String) -> String { Base64URL.encode(Array(json.utf8)) }
        let none = header(#"{"alg":"none"}"#) + "." + payload + "."
        #expect(Self.code(fixture, try fixture.minter.encrypt(Array(none.utf8))) == .unsupportedAlgorithm)
        // HS256 keyed with the verification key's bytes: the classic confusion attack.
        let hsInput = header(#"{"alg":"HS256"}"#) + "." + payload
        let mac = HMACSHA256.authenticationCode(key: fixture.keys.verificationKeySPKI, message: Array(hsInput.utf8))
        let hs256 = hsInput + "." + Base64URL.encode(mac)
        #expect(Self.code(fixture, try fixture.minter.encrypt(Array(hs256.utf8))) == .unsupportedAlgorithm)
        let crit = try fixture.minter.mint(
            payloadJSON: try PlayIntegrityMinter.json(Self.goodPayload()),
            jwsHeaderJSON: Array(#"{"alg":"ES256","crit":["b64"]}"#.utf8))
        #expect(Self.code(fixture, crit) == .unsupportedAlgorithm)
        let es384 = try fixture.minter.mint(
            payloadJSON: try PlayIntegrityMinter.json(Self.goodPayload()),
            jwsHeaderJSON: Array(#"{"alg":"ES384"}"#.utf8))
        #expect(Self.code(fixture, es384) == .unsupportedAlgorithm)

        // A real ES256 JWS, re-signed parts: a DER signature, a short one, a flipped bit.
        let jws = try fixture.minter.signedJWS(payloadJSON: try PlayIntegrityMinter.json(Self.goodPayload()))
        var jwsParts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        let rs = Base64URL.decode(Array(jwsParts[2].utf8)) ?? []
        let der = ECDSASignatureEncoding.der(fromRS: rs) ?? []
        for signature in [
            der, Array(rs.prefix(63)), [], rs.enumerated().map { $0.offset == 10 ? $0.element ^ 1 : $0.element },
        ] {
            jwsParts[2] = Base64URL.encode(signature)
            let text = jwsParts.joined(separator: ".")
            #expect(Self.code(fixture, try fixture.minter.encrypt(Array(text.utf8))) == .signatureInvalid)
        }
        // Not a JWS at all.
        for plaintext in ["hello", "a.b", "a.b.c.d", "." + payload + "."] {
            #expect(Self.code(fixture, try fixture.minter.encrypt(Array(plaintext.utf8))) == .badFormat, "\(plaintext)")
        }
    }

    @Test func certificateDigestsReadInEverySpelling() {
        let bytes = Self.certificateDigest
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        let colons = bytes.map { String(format: "%02X", $0) }.joined(separator: ":")
        for text in [
            hex, colons, Base64URL.encode(bytes), Data(bytes).base64EncodedString(),
            "hbIPcZHaBDzt_gLPHme8VCEVhRBzH-9JJ6JJdoy-0Ew",
        ] {
            #expect(PlayIntegrityPolicy.digestBytes(text) == bytes, "\(text)")
        }
        #expect(hex == "85b20f7191da043cedfe02cf1e67bc5421158510731fef4927a249768cbed04c")
        for text in ["", "abc", String(hex.dropLast()), hex + "00", "zz" + hex.dropFirst(2)] {
            #expect(PlayIntegrityPolicy.digestBytes(text) == nil, "\(text)")
        }
    }

    /// Every code an app developer can get appears in docs/protocol.md as `` `code` ``.
    @Test func everyCodeIsDocumented() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let doc = try String(contentsOf: root.appendingPathComponent("docs/protocol.md"), encoding: .utf8)
        let source = try String(
            contentsOf: root.appendingPathComponent("Sources/Verification/PlayIntegrity/PlayIntegrityError.swift"),
            encoding: .utf8)
        let declared = source.components(separatedBy: "Code(\"").dropFirst().compactMap {
            $0.split(separator: "\"").first
        }
        #expect(declared.count == PlayIntegrityError.allCodes.count)
        for code in PlayIntegrityError.allCodes {
            #expect(doc.contains("`\(code.rawValue)`"), "docs/protocol.md does not explain \(code)")
        }
    }
}
