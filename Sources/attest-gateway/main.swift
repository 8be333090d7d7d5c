import Foundation
import GatewayServe

// Thin entry point: pick the subcommand, run it, exit with its status.
// Every command prints exactly what its usage says; usage errors exit 2.

enum CommandTable {
    static var subcommands: [any Subcommand.Type] {
        [
            ServeCommand.self,
            CheckConfigCommand.self,
            VerifyAttestationCommand.self,
            VerifyAssertionCommand.self,
            VerifyReceiptCommand.self,
            SimInitCommand.self,
            SimAttestCommand.self,
            SimAssertCommand.self,
            KeysShowCommand.self,
            KeysRevokeCommand.self,
            DebugTokensCreateCommand.self,
            DebugTokensListCommand.self,
            DebugTokensRevokeCommand.self,
            KeysFindCommand.self,
            KeysListCommand.self,
            DeviceCheckQueryCommand.self,
            DeviceCheckUpdateCommand.self,
            DeviceCheckValidateCommand.self,
            AppleCheckCommand.self,
        ]
    }
}

func topLevelUsage() -> String {
    var text =
        "usage: attest-gateway <command> [options]   (attest-gateway <command> --help for details)\n"
        + "       attest-gateway --version\n\ncommands:\n"
    for command in CommandTable.subcommands {
        text += "  " + command.name.padding(toLength: 20, withPad: " ", startingAt: 0) + command.summary + "\n"
    }
    return text
}

func runMain() -> Int32 {
    let words = Array(CommandLine.arguments.dropFirst())
    guard let first = words.first else {
        printError(topLevelUsage())
        return 2
    }
    if first == "--version" || first == "-V" || first == "version" {
        print(GatewayVersion.line)
        return 0
    }
    if first == "--help" || first == "-h" || first == "help" {
        print(topLevelUsage(), terminator: "")
        return 0
    }
    // Two-word commands (`sim attest`, `keys show`, `debug-tokens create`) first, then one-word ones.
    let candidates: [(String, ArraySlice<String>)] = [
        (words.prefix(2).joined(separator: " "), words.dropFirst(2)),
        (first, words.dropFirst(1)),
    ]
    for (name, rest) in candidates {
        guard let command = CommandTable.subcommands.first(where: { $0.name == name }) else { continue }
        do {
            return try command.run(Array(rest))
        } catch let error as UsageError {
            printError("attest-gateway \(command.name): \(error.description)")
            printError(command.usage.split(separator: "\n").first.map(String.init) ?? command.usage)
            return 2
        } catch {
            printError("attest-gateway \(command.name): \(error)")
            return 1
        }
    }
    if first == "sim" || first == "keys" || first == "debug-tokens" || first == "devicecheck" || first == "apple" {
        let group = CommandTable.subcommands.filter { $0.name.hasPrefix(first + " ") }
        let usage = group.map { "  " + $0.usage.split(separator: "\n").first.map(String.init)! }.joined(separator: "\n")
        if words.count >= 2 && (words[1] == "--help" || words[1] == "-h") {
            print("usage:\n" + usage)
            return 0
        }
        printError("attest-gateway \(first): unknown or missing subcommand\nusage:\n" + usage)
        return 2
    }
    printError("attest-gateway: unknown command \(first)\n" + topLevelUsage())
    return 2
}

exit(runMain())
