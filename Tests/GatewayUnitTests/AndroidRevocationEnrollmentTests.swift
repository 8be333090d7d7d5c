import Foundation
import GatewayTesting
import GoogleClient
import Simulator
import Testing
import Verification

@testable import Enforcement
@testable import KeyStore
@testable import PolicyModel

/// An enrollment checked against the revocation list in use (`AndroidRevocationCurrent`): a
/// listed leaf or intermediate (REVOKED or SUSPENDED) is refused, a clean chain enrolls, no
/// list younger than `max_age` refuses with 503 unless `on_stale: allow`.
@Suite struct AndroidRevocationEnrollmentTests {
    static let authority = AndroidEnrollmentTests.authority

    static func verifier(_ current: AndroidRevocationCurrent?, onStale: AndroidRevocationSettings.OnStale = .refuse)
        throws -> AndroidEnrollmentVerifier
    {
        let app = AndroidAppPolicy(
            packageName: "com.example.app", signingDigests: [AndroidAttestationOptions.defaultSigningDigest])
        var settings = AndroidRevocationSettings.google
        settings.onStale = onStale
        let policy = AndroidPolicy(
            apps: [app], trustAnchorsPEM: [try Self.authority.get().rootCertificatePEM], revocation: settings)
        return try AndroidEnrollmentVerifier(policy: policy, revocation: current)
    }

    static func list(_ entries: [(der: [UInt8], status: String)]) throws -> AndroidRevocationList {
        let json = FakeStatusListServer.listJSON(
            Dictionary(uniqueKeysWithValues: try entries.map { (try Self.serial($0.der), $0.status) }))
        return try AndroidRevocationList(json: json)
    }

    static func serial(_ der: [UInt8]) throws -> String {
        // Certificate → TBSCertificate → [0] version → serialNumber (short lengths: the
        // simulator's certificates are small; long forms read by count).
        var index = 0
        func header() -> (UInt8, Int) {
            let tag = der[index]
            var length = Int(der[index + 1])
            index += 2
            if length & 0x80 != 0 {
                let count = length & 0x7f
                length = der[index..<index + count].reduce(0) { $0 << 8 | Int($1) }
                index += count
            }
            return (tag, length)
        }
        _ = header()
        _ = header()
        var field = header()
        if field.0 == 0xa0 {
            index += field.1
            field = header()
        }
        #expect(field.0 == 0x02)
        return der[index..<index + field.1].map { String(format: "%02x", $0) }.joined()
    }

    static func enroll(_ verifier: AndroidEnrollmentVerifier) throws -> (
        SimulatedAndroidKey, Result<KeyRecord, EnforcementError>
    ) {
        try AndroidEnrollmentTests.enroll(verifier: verifier)
    }

    @Test func aListedLeafOrIntermediateIsRefusedACleanChainEnrolls() throws {
        let current = AndroidRevocationCurrent(maximumAge: .seconds(86_400), onStale: .refuse)
        let verifier = try Self.verifier(current)
        let revoked = try Self.authority.get().generateKey(challenge: Array(AndroidEnrollmentTests.challenge.utf8))
        let suspended = try Self.authority.get().generateKey(challenge: Array(AndroidEnrollmentTests.challenge.utf8))
        current.publish(
            .init(
                list: try Self.list([(revoked.chain[0], "REVOKED"), (suspended.chain[0], "SUSPENDED")]),
                fetchedAt: Date(), source: "url"))
        for key in [revoked, suspended] {
            let body = AndroidReferenceClient.enrollmentBody(
                challenge: AndroidEnrollmentTests.challenge, chain: key.chain)
            let result = verifier.verify(try AndroidEnrollmentVerifier.parse(body), at: Date())
            guard case .failure(let error) = result else {
                Issue.record("a listed leaf enrolled")
                continue
            }
            #expect(error.code.rawValue == "android_certificate_revoked")
            #expect(error.code.status == 401)
        }
        #expect(AndroidEnrollmentTests.code(try Self.enroll(verifier).1) == nil)

        // The intermediate listed: every chain under it.
        let batch = revoked.chain[1]
        current.publish(.init(list: try Self.list([(batch, "REVOKED")]), fetchedAt: Date(), source: "redis"))
        #expect(AndroidEnrollmentTests.code(try Self.enroll(verifier).1) == "android_certificate_revoked")
    }

    @Test func noRecentListRefusesWith503UnlessOnStaleAllows() throws {
        let current = AndroidRevocationCurrent(maximumAge: .seconds(3600), onStale: .refuse)
        let verifier = try Self.verifier(current)
        let (_, none) = try Self.enroll(verifier)
        guard case .failure(let error) = none else {
            Issue.record("an enrollment without a list went through")
            return
        }
        #expect(error.code.rawValue == "android_revocation_list_stale")
        #expect(error.code.status == 503)
        #expect(error.reason.contains("no revocation status list"))

        current.publish(.init(list: .empty, fetchedAt: Date().addingTimeInterval(-3601), source: "url"))
        #expect(AndroidEnrollmentTests.code(try Self.enroll(verifier).1) == "android_revocation_list_stale")

        let allowing = AndroidRevocationCurrent(maximumAge: .seconds(3600), onStale: .allow)
        #expect(AndroidEnrollmentTests.code(try Self.enroll(try Self.verifier(allowing, onStale: .allow)).1) == nil)
    }

    @Test func withoutAHolderTheSettingsFailClosed() throws {
        // A tool that builds the verifier from a policy with `revocation:` but runs no fetcher.
        #expect(
            AndroidEnrollmentTests.code(try Self.enroll(try Self.verifier(nil)).1) == "android_revocation_list_stale")
        // `revocation: off` (nil settings): no list is checked.
        #expect(AndroidEnrollmentTests.code(try AndroidEnrollmentTests.enroll().1) == nil)
    }
}
