import Foundation
import Testing

extension EndToEnd {
    /// Every command answers `--help` with exit 0 and one `usage:` line; a group's help
    /// (`keys --help`) names each of its subcommands once, and the top-level help names every
    /// command with its summary apart from the name.
    @Suite struct HelpOutput {
        static func help(_ arguments: [String]) throws -> ToolRun {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            return try ToolRun.run(try E2EPaths.gatewayBinary(), arguments + ["--help"], in: directory)
        }

        /// The command lines of the top-level help: "  NAME  SUMMARY", NAME one or two words,
        /// at least two spaces before the summary.
        static func commandLines() throws -> [Substring] {
            let top = try Self.help([])
            return Array(top.stdout.split(separator: "\n").drop { $0 != "commands:" }.dropFirst())
        }

        static func commands() throws -> [String] {
            try Self.commandLines().map { line in
                line.dropFirst(2).components(separatedBy: "  ").first ?? ""
            }
        }

        @Test func topLevelHelpListsEveryCommandWithItsSummaryApart() throws {
            let top = try Self.help([])
            #expect(top.status == 0)
            #expect(top.stdout.components(separatedBy: "usage:").count == 2, "one usage line: \(top.stdout)")
            let names = try Self.commands()
            #expect(names.count >= 15, "\(names)")
            #expect(Set(names).count == names.count, "a command listed twice: \(names)")
            for line in try Self.commandLines() {
                let pattern = #/ {2}[a-z-]+( [a-z-]+)? {2,}\S.*/#
                #expect(line.wholeMatch(of: pattern) != nil, "name and summary run together: \(line)")
            }
        }

        @Test func everyCommandAnswersHelpWithOneUsageLine() throws {
            for name in try Self.commands() {
                let run = try Self.help(name.split(separator: " ").map(String.init))
                #expect(run.status == 0, "\(name) --help exit \(run.status): \(run.stderr)")
                let usages = run.stdout.components(separatedBy: "usage:").count - 1
                #expect(usages == 1, "`\(name) --help` prints usage: \(usages) times:\n\(run.stdout)")
                #expect(run.stdout.contains("attest-gateway \(name)"), "\(name) --help does not name itself")
            }
        }

        @Test func groupHelpNamesEachSubcommandOnce() throws {
            let names = try Self.commands()
            let groups = Set(names.compactMap { $0.contains(" ") ? String($0.split(separator: " ")[0]) : nil })
            #expect(groups.isSuperset(of: ["sim", "keys", "debug-tokens", "devicecheck", "apple"]))
            for group in groups {
                let run = try Self.help([group])
                #expect(run.status == 0, "\(group) --help exit \(run.status)")
                #expect(run.stdout.components(separatedBy: "usage:").count == 2, "\(group): \(run.stdout)")
                let lines = run.stdout.split(separator: "\n").dropFirst().map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
                #expect(Set(lines).count == lines.count, "\(group) --help repeats a line:\n\(run.stdout)")
                for name in names where name.hasPrefix(group + " ") {
                    let mentions = lines.filter {
                        $0.hasPrefix("attest-gateway \(name) ") || $0 == "attest-gateway \(name)"
                    }
                    #expect(
                        mentions.count == 1, "\(group) --help names `\(name)` \(mentions.count) times:\n\(run.stdout)")
                }
            }
        }
    }
}
