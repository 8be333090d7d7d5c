/// The parts of a vector's expected.json the tests compare (see the vectors' README, "Fields").
struct AndroidVectorExpectation: Decodable, Sendable {
    struct Verdicts: Decodable, Sendable {
        struct AtReferenceNow: Decodable, Sendable {
            var at: String
            var strict: String
        }

        var at: String
        var strict: String
        var at_reference_now: AtReferenceNow
    }

    struct Package: Decodable, Sendable {
        var name: String
        var version: Int
    }

    struct ApplicationID: Decodable, Sendable {
        var packages: [Package]
        var signatureDigestsSha256: [String]
    }

    struct RootOfTrust: Decodable, Sendable {
        var verifiedBootKey: String
        var deviceLocked: Bool
        var verifiedBootState: String
        var verifiedBootHash: String?
    }

    struct Summary: Decodable, Sendable {
        var attestationVersion: Int
        var attestationSecurityLevel: String
        var keymasterVersion: Int
        var keymasterSecurityLevel: String
        var attestationChallengeHex: String
        var uniqueIdHex: String
    }

    struct AuthorizationList: Decodable, Sendable {
        var purpose: [Int]?
        var algorithm: Int?
        var keySize: Int?
        var digest: [Int]?
        var ecCurve: Int?
        var noAuthRequired: Bool?
        var creationDateTime: Int?
        var origin: Int?
        var rootOfTrust: RootOfTrust?
        var osVersion: Int?
        var osPatchLevel: Int?
        var attestationApplicationId: ApplicationID?
        var vendorPatchLevel: Int?
        var bootPatchLevel: Int?
        var moduleHash: String?
    }

    struct Full: Decodable, Sendable {
        var softwareEnforced: AuthorizationList
        var hardwareEnforced: AuthorizationList
    }

    struct PolicySignals: Decodable, Sendable {
        var tagsAscending: Bool?
    }

    var name: String
    var expected_verdict: Verdicts
    var key_description: Summary?
    var key_description_full: Full?
    var policy_signals: PolicySignals?
    var extension_issues: [String]
}
