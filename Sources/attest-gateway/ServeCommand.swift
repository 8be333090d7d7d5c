// Placeholder until its owner lands the real command; exits 2 so nothing mistakes it for success.

enum ServeCommand: Subcommand {
    static let name = "serve"
    static let summary = "(not built yet)"
    static let usage = "attest-gateway serve"
    static func run(_ words: [String]) throws -> Int32 {
        printError("attest-gateway serve: not built yet")
        return 2
    }
}
