// Placeholder until its owner lands the real command; exits 2 so nothing mistakes it for success.

enum VerifyAttestationCommand: Subcommand {
    static let name = "verify-attestation"
    static let summary = "(not built yet)"
    static let usage = "attest-gateway verify-attestation"
    static func run(_ words: [String]) throws -> Int32 {
        printError("attest-gateway verify-attestation: not built yet")
        return 2
    }
}

enum VerifyAssertionCommand: Subcommand {
    static let name = "verify-assertion"
    static let summary = "(not built yet)"
    static let usage = "attest-gateway verify-assertion"
    static func run(_ words: [String]) throws -> Int32 {
        printError("attest-gateway verify-assertion: not built yet")
        return 2
    }
}
