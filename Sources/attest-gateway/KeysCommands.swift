// Placeholder until its owner lands the real command; exits 2 so nothing mistakes it for success.

enum KeysShowCommand: Subcommand {
    static let name = "keys show"
    static let summary = "(not built yet)"
    static let usage = "attest-gateway keys show"
    static func run(_ words: [String]) throws -> Int32 {
        printError("attest-gateway keys show: not built yet")
        return 2
    }
}

enum KeysRevokeCommand: Subcommand {
    static let name = "keys revoke"
    static let summary = "(not built yet)"
    static let usage = "attest-gateway keys revoke"
    static func run(_ words: [String]) throws -> Int32 {
        printError("attest-gateway keys revoke: not built yet")
        return 2
    }
}
