// Placeholder until its owner lands the real command; exits 2 so nothing mistakes it for success.

enum SimInitCommand: Subcommand {
    static let name = "sim init"
    static let summary = "(not built yet)"
    static let usage = "attest-gateway sim init"
    static func run(_ words: [String]) throws -> Int32 {
        printError("attest-gateway sim init: not built yet")
        return 2
    }
}

enum SimAttestCommand: Subcommand {
    static let name = "sim attest"
    static let summary = "(not built yet)"
    static let usage = "attest-gateway sim attest"
    static func run(_ words: [String]) throws -> Int32 {
        printError("attest-gateway sim attest: not built yet")
        return 2
    }
}

enum SimAssertCommand: Subcommand {
    static let name = "sim assert"
    static let summary = "(not built yet)"
    static let usage = "attest-gateway sim assert"
    static func run(_ words: [String]) throws -> Int32 {
        printError("attest-gateway sim assert: not built yet")
        return 2
    }
}
