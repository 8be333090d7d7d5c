import Foundation
import Testing

@testable import Verification

/// The golden test: every real chain of shared/vectors/android gives the README's strict
/// verdict at both of its evaluation times, and its KeyDescription parses to the fields
/// the independent parser (parse.py) found.
@Suite struct AndroidKeyAttestationVectorTests {
    static let verifier: AndroidAttestationChainVerifier = {
        do {
            return try AndroidAttestationChainVerifier()
        } catch {
            fatalError("\(error)")
        }
    }()

    static func expectation(_ name: String) throws -> AndroidVectorExpectation {
        try JSONDecoder().decode(
            AndroidVectorExpectation.self, from: try AndroidVectorFixtures.data("\(name)/expected.json"))
    }

    /// "ACCEPT" or "REJECT: <error>".
    static func strictVerdict(_ name: String, at time: Date) throws -> String {
        do {
            _ = try Self.verifier.verify(
                chain: try AndroidVectorFixtures.chain(name), at: time,
                revocationList: try AndroidVectorFixtures.statusSample())
            return "ACCEPT"
        } catch let error as AndroidAttestationError {
            return "REJECT: \(error.code): \(error.reason)"
        }
    }

    @Test func everyVectorFolderIsFound() throws {
        let names = try AndroidVectorFixtures.vectorNames()
        #expect(names.count >= 43, "\(AndroidVectorFixtures.directory.path) holds \(names.count) vectors")
    }

    @Test(arguments: try AndroidVectorFixtures.vectorNames())
    func strictVerdictAtBothTimes(_ name: String) throws {
        let expected = try Self.expectation(name)
        let verdicts = expected.expected_verdict
        for (at, strict) in [
            (verdicts.at, verdicts.strict), (verdicts.at_reference_now.at, verdicts.at_reference_now.strict),
        ] {
            let got = try Self.strictVerdict(name, at: try AndroidVectorFixtures.date(at))
            #expect(got.prefix(6) == strict.prefix(6), "\(name) at \(at): expected \(strict), got \(got)")
        }
    }

    /// Prints the tallies the report quotes (and fails if any differs).
    @Test func goldenTally() throws {
        var passing = [0, 0]
        let names = try AndroidVectorFixtures.vectorNames()
        for name in names {
            let verdicts = try Self.expectation(name).expected_verdict
            let cases = [
                (verdicts.at, verdicts.strict), (verdicts.at_reference_now.at, verdicts.at_reference_now.strict),
            ]
            for (slot, (at, strict)) in cases.enumerated() {
                let got = try Self.strictVerdict(name, at: try AndroidVectorFixtures.date(at))
                if got.prefix(6) == strict.prefix(6) { passing[slot] += 1 }
                print("android-vector \(name) @\(at) expected=\(strict) got=\(got)")
            }
        }
        print(
            "android-golden: at evaluations[0].at \(passing[0])/\(names.count), at 2026-11-28 \(passing[1])/\(names.count)"
        )
        #expect(passing == [names.count, names.count])
    }

    @Test(arguments: try AndroidVectorFixtures.vectorNames())
    func keyDescriptionFieldsMatch(_ name: String) throws {
        let expected = try Self.expectation(name)
        let leaf = try #require(try AndroidVectorFixtures.chain(name).first)
        let value = try #require(
            try AndroidVectorFixtures.keyDescriptionValue(certificate: leaf), "\(name): no extension")
        guard let summary = expected.key_description, let full = expected.key_description_full else {
            // parse.py could not parse it: neither may we.
            #expect(throws: AndroidAttestationError.self) { try AndroidKeyDescription(extensionValue: value) }
            return
        }
        if expected.policy_signals?.tagsAscending == false {
            // parse.py reads it with a warning; DER forbids it and so do we.
            let error = #expect(throws: AndroidAttestationError.self) {
                try AndroidKeyDescription(extensionValue: value)
            }
            #expect(error?.code == .keyDescriptionMalformed)
            #expect(error?.reason.contains("ascending") == true, "\(String(describing: error))")
            return
        }
        let description = try AndroidKeyDescription(extensionValue: value)
        #expect(description.attestationVersion == summary.attestationVersion)
        #expect(description.attestationSecurityLevel.description == summary.attestationSecurityLevel)
        #expect(description.keyMintVersion == summary.keymasterVersion)
        #expect(description.keyMintSecurityLevel.description == summary.keymasterSecurityLevel)
        #expect(description.attestationChallenge.hexString == summary.attestationChallengeHex)
        #expect(description.uniqueID.hexString == summary.uniqueIdHex)
        Self.compare(description.softwareEnforced, full.softwareEnforced, "\(name) softwareEnforced")
        Self.compare(description.hardwareEnforced, full.hardwareEnforced, "\(name) hardwareEnforced")
    }

    static func compare(
        _ list: AndroidAuthorizationList, _ expected: AndroidVectorExpectation.AuthorizationList, _ what: String
    ) {
        #expect(list.purposes.sorted() == (expected.purpose ?? []).sorted(), "\(what) purpose")
        #expect(list.algorithm == expected.algorithm, "\(what) algorithm")
        #expect(list.keySize == expected.keySize, "\(what) keySize")
        #expect(list.digests.sorted() == (expected.digest ?? []).sorted(), "\(what) digest")
        #expect(list.ecCurve == expected.ecCurve, "\(what) ecCurve")
        #expect(list.noAuthRequired == (expected.noAuthRequired ?? false), "\(what) noAuthRequired")
        #expect(list.creationDateTime == expected.creationDateTime, "\(what) creationDateTime")
        #expect(list.origin == expected.origin, "\(what) origin")
        #expect(list.osVersion == expected.osVersion, "\(what) osVersion")
        #expect(list.osPatchLevel == expected.osPatchLevel, "\(what) osPatchLevel")
        #expect(list.vendorPatchLevel == expected.vendorPatchLevel, "\(what) vendorPatchLevel")
        #expect(list.bootPatchLevel == expected.bootPatchLevel, "\(what) bootPatchLevel")
        #expect(list.moduleHash?.hexString == expected.moduleHash, "\(what) moduleHash")
        #expect((list.rootOfTrust == nil) == (expected.rootOfTrust == nil), "\(what) rootOfTrust presence")
        if let root = list.rootOfTrust, let expectedRoot = expected.rootOfTrust {
            #expect(root.verifiedBootKey.hexString == expectedRoot.verifiedBootKey, "\(what) verifiedBootKey")
            #expect(root.deviceLocked == expectedRoot.deviceLocked, "\(what) deviceLocked")
            #expect(root.verifiedBootState.description == expectedRoot.verifiedBootState, "\(what) verifiedBootState")
            #expect(root.verifiedBootHash?.hexString == expectedRoot.verifiedBootHash, "\(what) verifiedBootHash")
        }
        #expect(
            (list.attestationApplicationID == nil) == (expected.attestationApplicationId == nil),
            "\(what) attestationApplicationId presence")
        if let id = list.attestationApplicationID, let expectedID = expected.attestationApplicationId {
            let names = id.packages.map { $0.name ?? "hex:" + $0.nameBytes.hexString }
            #expect(names == expectedID.packages.map(\.name), "\(what) package names")
            #expect(id.packages.map(\.version) == expectedID.packages.map(\.version), "\(what) package versions")
            #expect(id.signatureDigests.map(\.hexString) == expectedID.signatureDigestsSha256, "\(what) digests")
        }
    }

    @Test func embeddedRootsAreTheFilesAndMatchEveryGoogleRootCertificateByKey() throws {
        let rootsDirectory = "roots/"
        let rsa2022 = String(
            decoding: try AndroidVectorFixtures.data(rootsDirectory + "google-hw-rsa-2022-f1c172a699eaf51d.pem"),
            as: UTF8.self)
        let ecdsa = String(
            decoding: try AndroidVectorFixtures.data(
                rootsDirectory + "google-hw-ecdsa-p384-2025-key-attestation-ca1.pem"),
            as: UTF8.self)
        let trim: (String) -> String = { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        #expect(trim(AndroidHardwareAttestationRoots.rsaPEM) == trim(rsa2022))
        #expect(trim(AndroidHardwareAttestationRoots.ecdsaP384PEM) == trim(ecdsa))

        let pinned = try AndroidHardwareAttestationRoots.allPEM.flatMap {
            try AndroidVectorFixtures.derCertificates(pem: $0)
        }.map { try AndroidChainCertificate(der: $0, label: "pinned").subjectPublicKeyInfo }
        let files = try FileManager.default.contentsOfDirectory(
            atPath: AndroidVectorFixtures.directory.appendingPathComponent(rootsDirectory).path)
        for file in files where file.hasSuffix(".pem") {
            let pem = String(decoding: try AndroidVectorFixtures.data(rootsDirectory + file), as: UTF8.self)
            let key = try AndroidChainCertificate(
                der: try #require(try AndroidVectorFixtures.derCertificates(pem: pem).first), label: file
            ).subjectPublicKeyInfo
            // The four RSA certificates share one key; the AOSP software roots must not match.
            #expect(pinned.contains(key) == file.hasPrefix("google-hw-"), "\(file)")
        }
    }
}
