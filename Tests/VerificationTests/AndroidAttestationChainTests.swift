import Foundation
import Testing

@testable import Verification

/// The chain verifier on the vectors' special cases and on damaged chains.
@Suite struct AndroidAttestationChainTests {
    static let verifier = AndroidKeyAttestationVectorTests.verifier

    static func refusal(
        _ chain: [[UInt8]], at time: String, verifier: AndroidAttestationChainVerifier = Self.verifier,
        list: AndroidRevocationList = .empty
    ) throws -> AndroidAttestationError? {
        let date = try AndroidVectorFixtures.date(time)
        do {
            _ = try verifier.verify(chain: chain, at: date, revocationList: list)
            return nil
        } catch {
            return error
        }
    }

    @Test func theSuspendedCertificateIsRefused() throws {
        let pem = String(decoding: try AndroidVectorFixtures.data("status/suspended-test-cert.pem"), as: UTF8.self)
        let certificate = try #require(try AndroidVectorFixtures.derCertificates(pem: pem).first)
        #expect(
            try AndroidChainCertificate(der: certificate, label: "x").serialHex == "cc66e9a93713b6e643b26c15879786f7")
        let list = try AndroidVectorFixtures.statusSample()
        #expect(list.status(serialHex: "CC66E9A93713B6E643B26C15879786F7")?.status == "SUSPENDED")
        let error = try Self.refusal([certificate], at: "2020-01-01T00:00:00Z", list: list)
        #expect(error?.code == .certificateRevoked)
        #expect(error?.reason.contains("SUSPENDED") == true, "\(String(describing: error))")
        // Without the list it fails later, on its (non-Google) issuer.
        #expect(try Self.refusal([certificate], at: "2020-01-01T00:00:00Z")?.code == .rootUntrusted)
    }

    @Test func aRevokedSerialAnywhereInAGoodChainIsRefused() throws {
        let name = "ak-blueline-sdk28-tee-ec-none"
        let chain = try AndroidVectorFixtures.chain(name)
        let at = "2018-09-28T23:40:35Z"
        #expect(try Self.refusal(chain, at: at) == nil)
        for certificate in chain {
            let serial = try AndroidChainCertificate(der: certificate, label: "x").serialHex
            let json = #"{"entries": {"00\#(serial.uppercased())": {"status": "REVOKED", "reason": "KEY_COMPROMISE"}}}"#
            let list = try AndroidRevocationList(json: Array(json.utf8))
            #expect(try Self.refusal(chain, at: at, list: list)?.code == .certificateRevoked)
        }
    }

    @Test func statusListKeysAreHexEvenWhenAllDigits() throws {
        let list = try AndroidRevocationList(
            json: [UInt8](try AndroidVectorFixtures.data("status/early-list-copy-2020.json")))
        #expect(list.entries.count == 10)
        #expect(list.status(serialHex: "6681152659205225093")?.status == "REVOKED")
        // The same digits read as decimal would be 0x5cb8...: not listed.
        #expect(list.status(serialHex: String(UInt64("6681152659205225093")!, radix: 16)) == nil)
        for bad in [#"[]"#, #"{"entries": {"xyz": {"status": "REVOKED"}}}"#, #"{"entries": {"ab": {}}}"#, "{"] {
            #expect(throws: AndroidAttestationError(.revocationListMalformed, "")) {
                try AndroidRevocationList(json: Array(bad.utf8))
            }
        }
    }

    @Test func theForgedAttestKeyChainIsRefused() throws {
        let chain = try AndroidVectorFixtures.chain("gak-fake-attestkey-chain-2023")
        let error = try Self.refusal(chain, at: "2023-03-08T15:18:10Z")
        #expect(error?.code == .attestKeyForged)
        #expect(error?.reason.contains("certificate 1") == true, "\(String(describing: error))")
    }

    @Test func attestKeyChainsCarryTheirAttestKeyDescriptions() throws {
        for (name, at, count) in [
            ("auditor-pixel7a-strongbox-factory-attestkey-2023", "2023-06-28T14:30:53Z", 1),
            ("gak-rkp-tee-attestkey-2023", "2023-03-08T14:36:10Z", 2),
        ] {
            let result = try Self.verifier.verify(
                chain: try AndroidVectorFixtures.chain(name), at: try AndroidVectorFixtures.date(at),
                revocationList: .empty)
            #expect(result.attestKeyDescriptions.count == count, "\(name)")
            #expect(
                result.attestKeyDescriptions.allSatisfy {
                    $0.hardwareEnforced.purposes.contains(AndroidAuthorizationList.purposeAttestKey)
                })
        }
    }

    @Test func theLeafKeyIsReturned() throws {
        let ec = try Self.verifier.verify(
            chain: try AndroidVectorFixtures.chain("ak-tegu-sdk37-tee-max-usage-count"),
            at: try AndroidVectorFixtures.date("2026-07-06T18:15:16Z"), revocationList: .empty)
        let point = try #require(ec.leafPublicKey.p256Point)
        #expect(point.count == 65 && point[0] == 0x04)
        #expect(ec.isGoogleRoot)
        // expected.json's leaf spkiSha256.
        #expect(
            SHA256.hash(ec.leafPublicKey.subjectPublicKeyInfo).hexString
                == "8380447da1a5bce0e2c7fdac57dfe00b2b8ff663b7dcb24f93bd2bce2e1ae117")
        let rsa = try Self.verifier.verify(
            chain: try AndroidVectorFixtures.chain("ak-akita-sdk34-tee-rsa-base-imei"),
            at: try AndroidVectorFixtures.date("2024-09-26T22:31:25Z"), revocationList: .empty)
        #expect(rsa.leafPublicKey.p256Point == nil)
        #expect(!rsa.leafPublicKey.subjectPublicKeyInfo.isEmpty)
        // ML-DSA leaf keys, which OpenSSL 3.0 cannot load: the SPKI is still returned.
        let mldsa = try Self.verifier.verify(
            chain: try AndroidVectorFixtures.chain("ak-tokay-sdk37-tee-mldsa-rkp"),
            at: try AndroidVectorFixtures.date("2026-04-28T13:50:50Z"), revocationList: .empty)
        #expect(mldsa.leafPublicKey.p256Point == nil)
        #expect(mldsa.leafPublicKey.subjectPublicKeyInfo.count > 1900)
    }

    @Test func softwareAttestationIsRefusedEvenUnderItsOwnAnchor() throws {
        let softwareRoot = String(
            decoding: try AndroidVectorFixtures.data("roots/aosp-software-attestation-root-ec.pem"), as: UTF8.self)
        let lenient = try AndroidAttestationChainVerifier(additionalTrustAnchorsPEM: [softwareRoot])
        let chain = try AndroidVectorFixtures.chain("multipaz-emulator-pixel3a-software-2025")
        let at = "2025-03-13T04:54:32Z"
        #expect(try Self.refusal(chain, at: at)?.code == .rootUntrusted)
        #expect(try Self.refusal(chain, at: at, verifier: lenient)?.code == .securityLevelSoftware)
        // Software attestation and KeyMint level TEE: refused as software, then as a mismatch.
        let mixed = try AndroidVectorFixtures.chain("ak-marlin-sdk29-software-ec")
        #expect(try Self.refusal(mixed, at: "2019-10-29T00:21:52Z", verifier: lenient)?.code == .securityLevelSoftware)
        let allowing = try AndroidAttestationChainVerifier(
            additionalTrustAnchorsPEM: [softwareRoot], allowsSoftwareAttestation: true)
        #expect(try Self.refusal(mixed, at: "2019-10-29T00:21:52Z", verifier: allowing)?.code == .securityLevelMismatch)
    }

    @Test func aLeafThatIsNeverValidIsRefused() throws {
        // The AOSP emulator's leaf ends (1969-12-31) before it begins (1970-01-01).
        let softwareRoot = String(
            decoding: try AndroidVectorFixtures.data("roots/aosp-software-attestation-root-rsa.pem"), as: UTF8.self)
        let lenient = try AndroidAttestationChainVerifier(additionalTrustAnchorsPEM: [softwareRoot])
        let chain = try AndroidVectorFixtures.chain("warden-emulator-software-rsa-2023")
        let error = try Self.refusal(chain, at: "2023-09-06T17:19:09Z", verifier: lenient)
        #expect(error?.code == .certificateExpired)
        #expect(error?.reason.contains("never valid") == true, "\(String(describing: error))")
    }

    @Test func anExtraAnchorIsNotAGoogleRoot() throws {
        let name = "gak-strongbox-ec-nongoogle-root-2019"
        let chain = try AndroidVectorFixtures.chain(name)
        let rootPEM =
            "-----BEGIN CERTIFICATE-----\n"
            + Data(try #require(chain.last)).base64EncodedString(options: .lineLength64Characters)
            + "\n-----END CERTIFICATE-----\n"
        let verifier = try AndroidAttestationChainVerifier(additionalTrustAnchorsPEM: [rootPEM])
        // Its root key is now trusted; the chain still breaks its name links (README: REJECT).
        #expect(try Self.refusal(chain, at: "2019-07-08T16:12:52Z", verifier: verifier)?.code == .chainInvalid)
        #expect(throws: AndroidAttestationError(.trustAnchorInvalid, "")) {
            try AndroidAttestationChainVerifier(additionalTrustAnchorsPEM: ["not a certificate"])
        }
    }

    @Test func damagedChainsAreRefusedWithTheirCodes() throws {
        let chain = try AndroidVectorFixtures.chain("auditor-pixel6pro-tee-2022")
        let at = "2022-05-17T22:48:43Z"
        #expect(try Self.refusal(chain, at: at) == nil)
        #expect(try Self.refusal([], at: at)?.code == .chainInvalid)
        #expect(try Self.refusal(Array(repeating: chain[0], count: 11), at: at)?.code == .chainInvalid)
        #expect(try Self.refusal([[0x30, 0x00]] + chain.dropFirst(), at: at)?.code == .certificateMalformed)
        #expect(try Self.refusal(Array(chain.dropLast()), at: at)?.code == .rootUntrusted)
        #expect(
            try Self.refusal([chain[0], chain[2], chain[1], chain[3]].prefix(chain.count).map { $0 }, at: at)?.code
                == .chainInvalid)
        #expect(try Self.refusal(Array(chain.dropFirst()), at: at)?.code == .keyDescriptionMissing)
        var tampered = chain
        tampered[0][tampered[0].count - 3] ^= 0x01
        #expect(try Self.refusal(tampered, at: at)?.code == .chainInvalid)
        #expect(try Self.refusal(chain, at: "2010-01-01T00:00:00Z")?.code == .certificateNotYetValid)
        #expect(try Self.refusal(chain, at: "2060-01-01T00:00:00Z")?.code == .certificateExpired)
    }

    /// Every bit of a real chain flipped, one at a time, in a sample of positions: a result
    /// or a typed error, never a trap.
    @Test func bitFlippedChainsNeverTrap() throws {
        let chain = try AndroidVectorFixtures.chain("gak-rkp-tee-attestkey-2023")
        let time = try AndroidVectorFixtures.date("2023-03-08T14:36:10Z")
        var random = SplitMix64(seed: 0x616e_6472_6f69_64)
        for _ in 0..<400 {
            var damaged = chain
            let which = Int.random(in: 0..<damaged.count, using: &random)
            let bit = Int.random(in: 0..<(damaged[which].count * 8), using: &random)
            damaged[which][bit / 8] ^= 1 << UInt8(bit % 8)
            _ = try? Self.verifier.verify(chain: damaged, at: time, revocationList: .empty)
        }
        #expect(OpenSSLErrorQueue.isEmpty)
    }

    @Test func everyCodeIsUniqueAndPrefixed() {
        let codes = AndroidAttestationError.Code.all.map(\.rawValue)
        #expect(Set(codes).count == codes.count)
        #expect(codes.allSatisfy { $0.hasPrefix("android_") && $0 == $0.lowercased() && !$0.contains(" ") })
    }
}
