import Foundation
import GatewayTesting
import Simulator
import Testing
import Verification

@testable import Enforcement
@testable import KeyStore
@testable import PolicyModel

/// The enrollment checks (`AndroidEnrollmentVerifier`: chain, then `AndroidKeyRequirements`)
/// and the request signature (`AndroidRequestSignature`), on chains minted by the simulator
/// under a test root given as an extra anchor.
@Suite struct AndroidEnrollmentTests {
    static let authority = Result { try SimulatedAndroidAuthority.generate() }
    static let challenge = "challenge-text"

    static func verifier(_ configure: (inout AndroidAppPolicy) -> Void = { _ in }) throws -> AndroidEnrollmentVerifier {
        var app = AndroidAppPolicy(
            packageName: "com.example.app", signingDigests: [AndroidAttestationOptions.defaultSigningDigest])
        configure(&app)
        let policy = AndroidPolicy(apps: [app], trustAnchorsPEM: [try Self.authority.get().rootCertificatePEM])
        return try AndroidEnrollmentVerifier(policy: policy)
    }

    static func enroll(
        _ options: AndroidAttestationOptions = AndroidAttestationOptions(), challenge: String = Self.challenge,
        verifier: AndroidEnrollmentVerifier? = nil
    ) throws -> (SimulatedAndroidKey, Result<KeyRecord, EnforcementError>) {
        let key = try Self.authority.get().generateKey(challenge: Array(Self.challenge.utf8), options: options)
        let body = AndroidReferenceClient.enrollmentBody(challenge: challenge, chain: key.chain)
        #expect(AndroidEnrollmentVerifier.isAndroidRequest(body))
        let request = try AndroidEnrollmentVerifier.parse(body)
        return (key, try (verifier ?? Self.verifier()).verify(request, at: Date()))
    }

    static func code(_ result: Result<KeyRecord, EnforcementError>) -> String? {
        if case .failure(let error) = result { return error.code.rawValue }
        return nil
    }

    @Test func aGoodChainGivesAnAndroidKeyRecord() throws {
        let (key, result) = try Self.enroll()
        let record = try result.get()
        #expect(record.keyID == key.keyID)
        #expect(record.platform == KeyRecord.androidPlatform)
        #expect(record.appID == "com.example.app")
        #expect(record.environment == "extra_anchor")
        #expect(record.publicKey.count == 65)
        #expect(record.counter == 0)
    }

    @Test(arguments: [3, 4, 100, 200, 300, 400])
    func everyAttestationVersionEnrolls(version: Int) throws {
        var options = AndroidAttestationOptions()
        options.attestationVersion = version
        #expect(Self.code(try Self.enroll(options).1) == nil)
    }

    @Test func eachRefusalHasItsOwnCode() throws {
        func refused(_ change: (inout AndroidAttestationOptions) -> Void) throws -> String? {
            var options = AndroidAttestationOptions()
            change(&options)
            return Self.code(try Self.enroll(options).1)
        }
        #expect(try refused { $0.packageName = "com.example.other" } == "android_package_mismatch")
        #expect(
            try refused { $0.signingDigests = [[UInt8](repeating: 1, count: 32)] } == "android_signing_digest_mismatch")
        #expect(try refused { $0.deviceLocked = false } == "android_bootloader_unlocked")
        #expect(try refused { $0.verifiedBootState = 2 } == "android_verified_boot_refused")
        #expect(try refused { $0.securityLevel = 0 } == "android_security_level_software")
        #expect(try refused { $0.purposes = [3] } == "android_key_properties_refused")
        #expect(try refused { $0.ecCurve = 2 } == "android_key_properties_refused")
        #expect(try refused { $0.origin = 2 } == "android_key_origin_refused")
        #expect(Self.code(try Self.enroll(challenge: "another").1) == "android_challenge_mismatch")
    }

    @Test func appSettingsChangeTheVerdict() throws {
        var strongbox = AndroidAttestationOptions()
        strongbox.securityLevel = 2
        let requiresStrongBox = try Self.verifier { $0.securityLevel = .strongbox }
        #expect(Self.code(try Self.enroll(verifier: requiresStrongBox).1) == "android_security_level_too_low")
        #expect(Self.code(try Self.enroll(strongbox, verifier: requiresStrongBox).1) == nil)

        var unlocked = AndroidAttestationOptions()
        unlocked.deviceLocked = false
        unlocked.verifiedBootState = 2
        let lenient = try Self.verifier {
            $0.requireLockedBootloader = false
            $0.requireVerifiedBoot = false
        }
        #expect(Self.code(try Self.enroll(unlocked, verifier: lenient).1) == nil)

        var software = AndroidAttestationOptions()
        software.securityLevel = 0
        let allowsSoftware = try Self.verifier { $0.securityLevel = .software }
        #expect(Self.code(try Self.enroll(software, verifier: allowsSoftware).1) == nil)

        var old = AndroidAttestationOptions()
        old.osPatchLevel = 202_312
        let recent = try Self.verifier { $0.minimumPatchLevel = 202_401 }
        #expect(Self.code(try Self.enroll(old, verifier: recent).1) == "android_patch_level_too_old")
        old.osPatchLevel = nil
        #expect(Self.code(try Self.enroll(old, verifier: recent).1) == "android_patch_level_too_old")
        old.osPatchLevel = 20_240_105
        #expect(Self.code(try Self.enroll(old, verifier: recent).1) == nil)
    }

    @Test func aChainUnderAnUnconfiguredRootIsUntrusted() throws {
        let other = try SimulatedAndroidAuthority.generate()
        let key = try other.generateKey(challenge: Array(Self.challenge.utf8))
        let request = try AndroidEnrollmentVerifier.parse(
            AndroidReferenceClient.enrollmentBody(challenge: Self.challenge, chain: key.chain))
        #expect(Self.code(try Self.verifier().verify(request, at: Date())) == "android_root_untrusted")
    }

    @Test func malformedBodiesAreRefused() {
        for body in [
            #"{"platform":"android","challenge":"c"}"#,
            #"{"platform":"android","challenge":"c","certificate_chain":[]}"#,
            #"{"platform":"android","challenge":"c","certificate_chain":["%%%"]}"#,
            #"{"platform":"android","challenge":"","certificate_chain":["AAAA"]}"#,
            #"{"platform":"android","challenge":"c","certificate_chain":[1]}"#,
        ] {
            #expect(throws: EnforcementError(.malformedRequest, "")) {
                try AndroidEnrollmentVerifier.parse(Array(body.utf8))
            }
        }
        #expect(!AndroidEnrollmentVerifier.isAndroidRequest(Array(#"{"key_id":"x","platform":"ios"}"#.utf8)))
        #expect(!AndroidEnrollmentVerifier.isAndroidRequest(Array(#"{"key_id":"x"}"#.utf8)))
    }

    @Test func requestSignaturesVerifyOnlyForTheirBytes() throws {
        let (key, result) = try Self.enroll()
        let record = try result.get()
        let publicKey = try ECPublicKey(x962: record.publicKey)
        let hash = SHA256.hash(Array("client data".utf8))
        let assertion = try key.assertion(clientDataHash: hash, counter: 7)
        let signature = try AndroidRequestSignature(assertion: assertion)
        #expect(signature.counter == 7)
        try signature.verify(clientDataHash: hash, publicKey: publicKey)
        #expect(throws: AndroidAttestationError(.requestSignatureInvalid, "")) {
            try signature.verify(clientDataHash: SHA256.hash(Array("other".utf8)), publicKey: publicKey)
        }
        // The counter is signed: a changed counter byte breaks the signature.
        var moved = assertion
        moved[7] ^= 0x01
        #expect(throws: AndroidAttestationError(.requestSignatureInvalid, "")) {
            try AndroidRequestSignature(assertion: moved).verify(clientDataHash: hash, publicKey: publicKey)
        }
        #expect(throws: AndroidAttestationError(.requestSignatureMalformed, "")) {
            try AndroidRequestSignature(assertion: Array(assertion.prefix(8)))
        }
        #expect(throws: AndroidAttestationError(.requestCounterOutOfRange, "")) {
            try AndroidRequestSignature(assertion: [UInt8](repeating: 0, count: 8) + assertion.dropFirst(8))
        }
        #expect(throws: AndroidAttestationError(.requestCounterOutOfRange, "")) {
            try AndroidRequestSignature(assertion: [0, 0, 0, 1, 0, 0, 0, 0] + assertion.dropFirst(8))
        }
    }

    @Test func signedBytesAreTheDocumentedLayout() {
        let hash = [UInt8](repeating: 0x11, count: 32)
        let bytes = AndroidRequestSignature.signedBytes(counter: 0x0102_0304_0506_0708, clientDataHash: hash)
        #expect(bytes == Array("attest-gateway-android-v1".utf8) + [1, 2, 3, 4, 5, 6, 7, 8] + hash)
    }

    @Test func platformRefusalsNameTheirPlatform() {
        var route = RoutePolicy(name: "r", match: .init(pathPrefix: "/"), upstream: "api", mode: .enforce)
        #expect(AndroidRequestCheck.platformRefusal(.android, route: route) == nil)
        route.platforms = [.ios]
        #expect(AndroidRequestCheck.platformRefusal(.android, route: route)?.code == .platformAndroidRefused)
        #expect(AndroidRequestCheck.platformRefusal(.ios, route: route) == nil)
        route.platforms = [.android]
        #expect(AndroidRequestCheck.platformRefusal(.ios, route: route)?.code == .platformIOSRefused)
    }
}
