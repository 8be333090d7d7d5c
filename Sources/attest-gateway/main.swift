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
            VerifyAndroidAttestationCommand.self,
            SimInitCommand.self,
            SimAttestCommand.self,
            SimAssertCommand.self,
            SimAndroidEnrollCommand.self,
            SimAndroidSignCommand.self,
            KeysShowCommand.self,
            KeysRevokeCommand.self,
            KeysFindCommand.self,
            KeysListCommand.self,
            DebugTokensCreateCommand.self,
            DebugTokensListCommand.self,
            DebugTokensRevokeCommand.self,
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
    let width = (CommandTable.subcommands.map { $0.name.count }.max() ?? 0) + 2
    for command in CommandTable.subcommands {
        text += "  " + command.name.padding(toLength: width, withPad: " ", startingAt: 0) + command.summary + "\n"
    }
    return text
}

/// `attest-gateway keys --help` and friends: one `usage:` line, then each subcommand's
/// synopsis (the first line of its usage) once, in table order.
func groupUsage(_ group: String) -> String {
    var lines: [String] = []
    for command in CommandTable.subcommands where command.name.hasPrefix(group + " ") {
        let first = command.usage.split(separator: "\n").first.map(String.init) ?? command.name
        let synopsis = first.hasPrefix("usage: ") ? String(first.dropFirst("usage: ".count)) : first
        if !lines.contains(synopsis) { lines.append(synopsis) }
    }
    return "usage:\n" + lines.map { "  " + $0 }.joined(separator: "\n")
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
        let usage = groupUsage(first)
        if words.count >= 2 && (words[1] == "--help" || words[1] == "-h") {
            print(usage)
            return 0
        }
        printError("attest-gateway \(first): unknown or missing subcommand\n" + usage)
        return 2
    }
    printError("attest-gateway: unknown command \(first)\n" + topLevelUsage())
    return 2
}

exit(runMain())
