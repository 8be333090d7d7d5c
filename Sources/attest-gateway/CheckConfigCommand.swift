// Placeholder until its owner lands the real command; exits 2 so nothing mistakes it for success.

enum CheckConfigCommand: Subcommand {
    static let name = "check-config"
    static let summary = "(not built yet)"
    static let usage = "attest-gateway check-config"
    static func run(_ words: [String]) throws -> Int32 {
        printError("attest-gateway check-config: not built yet")
        return 2
    }
}
