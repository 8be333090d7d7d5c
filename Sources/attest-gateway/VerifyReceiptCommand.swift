// Placeholder until its owner lands the real command; exits 2 so nothing mistakes it for success.

enum VerifyReceiptCommand: Subcommand {
    static let name = "verify-receipt"
    static let summary = "(not built yet)"
    static let usage = "attest-gateway verify-receipt"
    static func run(_ words: [String]) throws -> Int32 {
        printError("attest-gateway verify-receipt: not built yet")
        return 2
    }
}
