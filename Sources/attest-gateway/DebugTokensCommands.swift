import Foundation
import KeyStore

/// `attest-gateway debug-tokens create --name NAME --ttl 30d`: mint a debug token.
enum DebugTokensCreateCommand: Subcommand {
    static let name = "debug-tokens create"
    static let summary = "create a named debug token for simulators and CI (shown once)"
    static let usage = """
        usage: attest-gateway debug-tokens create --name NAME --ttl DURATION (--redis URL | --config FILE)
          --name NAME      1-64 letters, digits, _ - . (logged with every use)
          --ttl DURATION   lifetime: 30d, 12h, 90m, 3600s (at most 366d)
          Prints {"name","token","expires_at"}. The token is shown only now: the store keeps its
          SHA-256. Apps send it in X-App-Attest-Debug-Token; only routes with
          allow_debug_tokens: true accept it. Exit 0 created, 1 name taken or store error.
        """

    static func run(_ words: [String]) throws -> Int32 {
        let arguments = try CommandLineArguments(words, valued: ["redis", "config", "name", "ttl"])
        if arguments.wantsHelp {
            print(Self.usage)
            return 0
        }
        if let first = arguments.positionals.first { throw UsageError("unexpected argument \(first)") }
        let name = try arguments.required("name")
        guard DebugTokens.isValidName(name) else {
            throw UsageError("--name must be 1-64 letters, digits, _ - . (not \(name.prefix(80)))")
        }
        let ttlText = try arguments.required("ttl")
        guard let lifetime = DebugTokenAdministration.lifetime(ttlText) else {
            throw UsageError("--ttl must be like 30d, 12h, 90m or 3600s, at most 366d (not \(ttlText.prefix(40)))")
        }
        let store = try KeysCommandSupport.openStore(arguments, label: "attest-gateway.debug-tokens")
        defer { store.close() }
        guard
            let created = try DebugTokenAdministration.create(
                store, name: name, lifetime: lifetime, timeout: KeysCommandSupport.timeout)
        else {
            printError("attest-gateway debug-tokens create: a token named \(name) exists (revoke it first)")
            return 1
        }
        printJSON([
            ("name", jsonQuote(created.record.name)),
            ("token", jsonQuote(created.token)),
            ("expires_at", jsonQuote(KeyAdministration.rfc3339(created.record.expiresAt))),
        ])
        return 0
    }
}

/// `attest-gateway debug-tokens list`: every token, without its secret.
enum DebugTokensListCommand: Subcommand {
    static let name = "debug-tokens list"
    static let summary = "list debug tokens (name, created, expiry, last use; never the token)"
    static let usage = """
        usage: attest-gateway debug-tokens list (--redis URL | --config FILE)
          Prints one JSON object per line: {"name","created_at","expires_at","last_used","expired"}.
        """

    static func run(_ words: [String]) throws -> Int32 {
        let arguments = try CommandLineArguments(words, valued: ["redis", "config"])
        if arguments.wantsHelp {
            print(Self.usage)
            return 0
        }
        if let first = arguments.positionals.first { throw UsageError("unexpected argument \(first)") }
        let store = try KeysCommandSupport.openStore(arguments, label: "attest-gateway.debug-tokens")
        defer { store.close() }
        for record in try DebugTokenAdministration.list(store, timeout: KeysCommandSupport.timeout) {
            print(DebugTokenAdministration.json(record))
        }
        return 0
    }
}

/// `attest-gateway debug-tokens revoke NAME`: delete a token; its requests are refused from then on.
enum DebugTokensRevokeCommand: Subcommand {
    static let name = "debug-tokens revoke"
    static let summary = "revoke a debug token by name"
    static let usage = """
        usage: attest-gateway debug-tokens revoke NAME (--redis URL | --config FILE)
          Deletes the token; requests carrying it get 401 debug_token_invalid.
          Prints {"revoked":"NAME"}. Exit 0 revoked, 1 no such token or store error.
        """

    static func run(_ words: [String]) throws -> Int32 {
        let arguments = try CommandLineArguments(words, valued: ["redis", "config"])
        if arguments.wantsHelp {
            print(Self.usage)
            return 0
        }
        guard arguments.positionals.count == 1 else {
            throw UsageError(arguments.positionals.isEmpty ? "missing NAME" : "expected one NAME")
        }
        let name = arguments.positionals[0]
        let store = try KeysCommandSupport.openStore(arguments, label: "attest-gateway.debug-tokens")
        defer { store.close() }
        guard try DebugTokenAdministration.revoke(store, name: name, timeout: KeysCommandSupport.timeout) else {
            printError("attest-gateway debug-tokens revoke: no debug token named \(name.prefix(80))")
            return 1
        }
        printJSON([("revoked", jsonQuote(name))])
        return 0
    }
}
