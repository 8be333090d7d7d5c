import Foundation
import Testing

@testable import Verification

/// The chain checks that need a chain Google never signed: under a test root passed as an
/// extra anchor.
@Suite struct AndroidSyntheticChainTests {
    typealias Chains = AndroidSyntheticChains

    static func verify(_ pem: String, at time: String = "2026-06-01T00:00:00Z") throws -> AndroidAttestationResult {
        let verifier = try AndroidAttestationChainVerifier(additionalTrustAnchorsPEM: [Chains.root])
        return try verifier.verify(
            chain: try AndroidVectorFixtures.derCertificates(pem: pem), at: try AndroidVectorFixtures.date(time),
            revocationList: .empty)
    }

    static func code(_ pem: String) throws -> AndroidAttestationError.Code? {
        do {
            _ = try Self.verify(pem)
            return nil
        } catch let error as AndroidAttestationError {
            return error.code
        }
    }

    @Test func aGoodChainUnderAnExtraAnchor() throws {
        let result = try Self.verify(Chains.good)
        #expect(!result.isGoogleRoot)
        #expect(result.chainLength == 3)
        #expect(result.keyDescription.attestationChallenge == Array("synthetic".utf8))
        #expect(result.keyDescription.attestationVersion == 400)
        #expect(result.leafPublicKey.p256Point?.count == 65)
        #expect(result.attestKeyDescriptions.isEmpty)
        // The pinned-only verifier does not know the test root.
        let pinned = try AndroidAttestationChainVerifier()
        #expect(throws: AndroidAttestationError(.rootUntrusted, "")) {
            try pinned.verify(
                chain: try AndroidVectorFixtures.derCertificates(pem: Chains.good),
                at: try AndroidVectorFixtures.date("2026-06-01T00:00:00Z"), revocationList: .empty)
        }
    }

    @Test func anAttestKeyOfTheLeafsLevelIsAccepted() throws {
        let result = try Self.verify(Chains.attestKey)
        #expect(result.attestKeyDescriptions.count == 1)
        #expect(result.attestKeyDescriptions.first?.hardwareEnforced.purposes == [7])
    }

    @Test func eachBrokenRuleHasItsCode() throws {
        #expect(try Self.code(Chains.noRootOfTrust) == .rootOfTrustMissing)
        #expect(try Self.code(Chains.levelMismatch) == .securityLevelMismatch)
        #expect(try Self.code(Chains.misplaced) == .keyDescriptionMisplaced)
        #expect(try Self.code(Chains.rootWithKeyDescription) == .keyDescriptionMisplaced)
        #expect(try Self.code(Chains.attestKeyOtherLevel) == .attestKeyForged)
        #expect(try Self.code(Chains.noKeyDescription) == .keyDescriptionMissing)
    }

    @Test func validityBoundsAreInclusive() throws {
        _ = try Self.verify(Chains.good, at: "2026-01-01T00:00:00Z")
        _ = try Self.verify(Chains.good, at: "2035-12-30T00:00:00Z")
        #expect(throws: AndroidAttestationError(.certificateNotYetValid, "")) {
            try Self.verify(Chains.good, at: "2025-12-31T23:59:59Z")
        }
        #expect(throws: AndroidAttestationError(.certificateExpired, "")) {
            try Self.verify(Chains.good, at: "2035-12-30T00:00:01Z")
        }
    }
}
