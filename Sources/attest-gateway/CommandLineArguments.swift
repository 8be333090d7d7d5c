import Foundation

/// A usage error: the command prints its usage line on stderr and exits 2.
struct UsageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// `--name value` options (repeatable), `--flag` switches and positional words.
///
/// Every command declares the options it knows; anything else is a usage error, so
/// a typo never silently falls back to a default.
struct CommandLineArguments {
    private(set) var options: [String: [String]] = [:]
    private(set) var flags: Set<String> = []
    private(set) var positionals: [String] = []

    /// - Parameters:
    ///   - valued: option names that take a value (without `--`).
    ///   - switches: option names that take none (`help` is always accepted).
    init(_ words: [String], valued: Set<String>, switches: Set<String> = []) throws(UsageError) {
        var index = 0
        while index < words.count {
            let word = words[index]
            if word == "--help" || word == "-h" {
                self.flags.insert("help")
            } else if word.hasPrefix("--") {
                var name = String(word.dropFirst(2))
                var inlineValue: String?
                if let eq = name.firstIndex(of: "=") {
                    inlineValue = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                if valued.contains(name) {
                    if let inlineValue {
                        self.options[name, default: []].append(inlineValue)
                    } else {
                        guard index + 1 < words.count else { throw UsageError("--\(name) needs a value") }
                        index += 1
                        self.options[name, default: []].append(words[index])
                    }
                } else if switches.contains(name) {
                    self.flags.insert(name)
                } else {
                    throw UsageError("unknown option --\(name)")
                }
            } else {
                self.positionals.append(word)
            }
            index += 1
        }
    }

    var wantsHelp: Bool { self.flags.contains("help") }

    func has(_ flag: String) -> Bool { self.flags.contains(flag) }

    /// The single value of `--name`, or nil; given twice is a usage error.
    func value(_ name: String) throws(UsageError) -> String? {
        guard let values = self.options[name] else { return nil }
        guard values.count == 1 else { throw UsageError("--\(name) given more than once") }
        return values[0]
    }

    func required(_ name: String) throws(UsageError) -> String {
        guard let value = try self.value(name) else { throw UsageError("missing --\(name)") }
        return value
    }

    func values(_ name: String) -> [String] { self.options[name] ?? [] }

    /// Standard base64 (padding optional), else a usage error naming the option.
    func base64(_ name: String) throws(UsageError) -> [UInt8]? {
        guard let text = try self.value(name) else { return nil }
        guard let bytes = decodeBase64(text) else { throw UsageError("--\(name) is not valid base64") }
        return bytes
    }

    func requiredBase64(_ name: String) throws(UsageError) -> [UInt8] {
        guard let bytes = try self.base64(name) else { throw UsageError("missing --\(name)") }
        return bytes
    }

    /// ISO 8601 (`2024-04-18T00:00:00Z`, fractional seconds allowed).
    func date(_ name: String) throws(UsageError) -> Date? {
        guard let text = try self.value(name) else { return nil }
        guard let date = parseISO8601(text) else { throw UsageError("--\(name) is not an ISO-8601 time: \(text)") }
        return date
    }
}

func decodeBase64(_ text: String) -> [UInt8]? {
    var normalized = text.trimmingCharacters(in: .whitespacesAndNewlines)
    let remainder = normalized.count % 4
    if remainder == 2 { normalized += "==" } else if remainder == 3 { normalized += "=" }
    guard let data = Data(base64Encoded: normalized) else { return nil }
    return [UInt8](data)
}

func encodeBase64(_ bytes: some Collection<UInt8>) -> String {
    Data(bytes).base64EncodedString()
}

func parseISO8601(_ text: String) -> Date? {
    let plain = ISO8601DateFormatter()
    if let date = plain.date(from: text) { return date }
    let fractional = ISO8601DateFormatter()
    fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return fractional.date(from: text)
}

func formatISO8601(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime]
    return formatter.string(from: date)
}

/// Writes one JSON object as a single line on stdout. Values are already JSON text.
func printJSON(_ pairs: [(String, String)]) {
    var out = "{"
    for (i, (key, value)) in pairs.enumerated() {
        if i > 0 { out += "," }
        out += jsonQuote(key) + ":" + value
    }
    out += "}\n"
    FileHandle.standardOutput.write(Data(out.utf8))
}

func jsonQuote(_ s: String) -> String {
    let data = try? JSONSerialization.data(withJSONObject: [s], options: [.withoutEscapingSlashes])
    guard let data, let text = String(data: data, encoding: .utf8) else { return "\"\"" }
    return String(text.dropFirst().dropLast())
}

func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// A subcommand of `attest-gateway`.
protocol Subcommand {
    /// e.g. `verify-attestation` or `sim attest`.
    static var name: String { get }
    /// One line: what it does.
    static var summary: String { get }
    /// Full usage text printed by --help (and its first line on a usage error).
    static var usage: String { get }
    /// Returns the exit status. Throws UsageError for bad arguments (exit 2).
    static func run(_ words: [String]) throws -> Int32
}
