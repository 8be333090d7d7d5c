import Foundation
import GatewayIO

/// Loads and validates `policies.yaml` (schema and defaults: see `PolicyDecoder`; warnings:
/// `PolicyLint`).
///
/// Blocking file I/O: call it at start-up, from `check-config`, or on a reload queue, never
/// on a connection queue. A failed load throws and leaves nothing half-applied, so a SIGHUP
/// reload of a bad file keeps the running policy.
public enum PolicyLoader {
    /// Files larger than this are refused before parsing (a policy is a few KiB).
    public static let maximumFileBytes = 1 << 20

    /// Reads, parses and validates the file at `path`.
    public static func load(path: String) throws(PolicyError) -> GatewayPolicy {
        var warnings: [PolicyWarning] = []
        return try Self.load(path: path, warnings: &warnings)
    }

    /// As `load(path:)`, also returning the warnings (unreachable routes, development trust
    /// roots, ...) that `check-config` prints and `serve` logs.
    public static func load(path: String, warnings: inout [PolicyWarning]) throws(PolicyError) -> GatewayPolicy {
        let bytes = try Self.readFile(path)
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw PolicyError(
                code: .notUTF8,
                file: path,
                line: 0,
                column: 0,
                field: "",
                message: "expected UTF-8 text; found invalid bytes"
            )
        }
        return try Self.parse(text, sourcePath: path, warnings: &warnings)
    }

    /// As `load(path:)`, writing each warning to the operational log as a `policy_warning`
    /// event (code, file, line, column, field, message): what `serve` wants at start and on
    /// reload, so that extra trust roots and unreachable routes are logged loudly.
    public static func loadLoggingWarnings(path: String) throws(PolicyError) -> GatewayPolicy {
        var warnings: [PolicyWarning] = []
        let policy = try Self.load(path: path, warnings: &warnings)
        for warning in warnings {
            Log.warning(
                "policy_warning",
                [
                    ("code", warning.code), ("file", warning.file), ("line", String(warning.line)),
                    ("column", String(warning.column)), ("field", warning.field), ("message", warning.message),
                ]
            )
        }
        return policy
    }

    /// Parses and validates policy text. `sourcePath` names the file in messages, and relative
    /// `trust_roots` resolve against its directory (the current directory for a bare name).
    public static func parse(_ text: String, sourcePath: String) throws(PolicyError) -> GatewayPolicy {
        var warnings: [PolicyWarning] = []
        return try Self.parse(text, sourcePath: sourcePath, warnings: &warnings)
    }

    public static func parse(
        _ text: String,
        sourcePath: String,
        warnings: inout [PolicyWarning]
    ) throws(PolicyError) -> GatewayPolicy {
        try Self.parse(text, sourcePath: sourcePath, environment: .process, warnings: &warnings)
    }

    /// As `parse(_:sourcePath:warnings:)`, with `${NAME}` references resolved from
    /// `environment` instead of the process environment (tests).
    package static func parse(
        _ text: String,
        sourcePath: String,
        environment: PolicyEnvironment,
        warnings: inout [PolicyWarning]
    ) throws(PolicyError) -> GatewayPolicy {
        let bytes = Array(text.utf8)
        guard bytes.count <= Self.maximumFileBytes else {
            throw Self.tooLarge(sourcePath, bytes.count)
        }
        var substitutions: [PolicyEnvironment.Substitution] = []
        do throws(PolicyError) {
            let root = try YAMLReader.read(
                bytes, sourcePath: sourcePath, environment: environment, substitutions: &substitutions)
            let decoder = PolicyDecoder(file: sourcePath, baseDirectory: Self.directory(of: sourcePath))
            let (policy, source) = try decoder.decode(root)
            warnings = PolicyLint(file: sourcePath).warnings(policy, source: source).map { warning in
                var redacted = warning
                redacted.message = PolicyEnvironment.redact(warning.message, substitutions)
                return redacted
            }
            return policy
        } catch {
            // A substituted value may be a secret: whatever a decoder quoted, it is not shown.
            var redacted = error
            redacted.message = PolicyEnvironment.redact(error.message, substitutions)
            throw redacted
        }
    }

    /// The directory holding `path` (absolute), for resolving relative paths inside the file.
    static func directory(of path: String) -> String {
        let cwd = FileManager.default.currentDirectoryPath
        let absolute = path.hasPrefix("/") ? path : (cwd as NSString).appendingPathComponent(path)
        return ((absolute as NSString).deletingLastPathComponent as NSString).standardizingPath
    }

    private static func tooLarge(_ path: String, _ count: Int) -> PolicyError {
        PolicyError(
            code: .fileTooLarge,
            file: path,
            line: 0,
            column: 0,
            field: "",
            message: "expected a policy of at most \(Self.maximumFileBytes) bytes; found \(count) bytes"
        )
    }

    /// Reads at most `maximumFileBytes + 1` bytes, with the OS error on failure.
    private static func readFile(_ path: String) throws(PolicyError) -> [UInt8] {
        func failure(_ message: String) -> PolicyError {
            PolicyError(code: .fileUnreadable, file: path, line: 0, column: 0, field: "", message: message)
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure("cannot open: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure("cannot stat: \(String(cString: strerror(errno)))") }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw failure("not a regular file") }
        guard Int(info.st_size) <= Self.maximumFileBytes else { throw Self.tooLarge(path, Int(info.st_size)) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure("cannot read: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
            // The file may have grown since fstat.
            guard bytes.count <= Self.maximumFileBytes else { throw Self.tooLarge(path, bytes.count) }
        }
        return bytes
    }
}
