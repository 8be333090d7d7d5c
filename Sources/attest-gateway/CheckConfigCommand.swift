import PolicyModel

/// `attest-gateway check-config FILE`: validate a policy and print what it means;
/// `--strict` also refuses a policy that loads with warnings.
enum CheckConfigCommand: Subcommand {
    static let name = "check-config"
    static let summary = "validate policies.yaml and print the effective policy"
    static let usage = """
        usage: attest-gateway check-config [--strict] FILE | --config FILE
          Validates the policy file and prints the effective policy (listeners, store with the
          password masked, App IDs, environment, upstreams, one line per route in match order
          with every setting including defaults) and any warnings; exit 0.
          An invalid file prints FILE:LINE:COLUMN: FIELD: MESSAGE on stderr; exit 2.
          --strict  refuse a policy that has any warning, of every kind: a production policy
                    should have none (the security ones such as case_sensitive_route_shadowed,
                    and memory_store or development_trust_roots too, so a development policy
                    fails). Each is printed on stderr as "error: FILE:LINE:COLUMN: FIELD:
                    MESSAGE [code]", nothing on stdout; exit 1.
        """

    static func run(_ words: [String]) throws -> Int32 {
        let arguments = try CommandLineArguments(words, valued: ["config"], switches: ["strict"])
        if arguments.wantsHelp {
            print(Self.usage)
            return 0
        }
        let path: String
        switch (try arguments.value("config"), arguments.positionals.count) {
        case (.some(let config), 0): path = config
        case (.none, 1): path = arguments.positionals[0]
        case (.some, _): throw UsageError("give the policy file once: FILE or --config FILE")
        case (.none, 0): throw UsageError("missing policy FILE")
        case (.none, _): throw UsageError("expected one policy FILE")
        }
        var warnings: [PolicyWarning] = []
        do {
            let policy = try PolicyLoader.load(path: path, warnings: &warnings)
            if arguments.has("strict") && !warnings.isEmpty {
                for warning in warnings {
                    printError("error: \(warning.description) [\(warning.code)]")
                }
                printError("check-config --strict: refused, \(warnings.count) warning(s)")
                return 1
            }
            print(PolicySummary.render(policy, warnings: warnings), terminator: "")
            return 0
        } catch {
            printError(error.description)
            return 2
        }
    }
}
