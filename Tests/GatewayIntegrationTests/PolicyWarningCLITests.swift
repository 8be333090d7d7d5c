import Foundation
import GatewayTesting
import Testing

/// `attest-gateway check-config --strict`, the built binary: a policy with warnings is refused,
/// each warning an error line on stderr; a policy without any passes as without `--strict`.
@Suite struct PolicyWarningCLITests {
    private struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    private static let shadowed = """
        redis: redis://127.0.0.1:6379/0
        app_ids: ["ABCDE12345.com.example.app"]
        upstreams: { api: { url: "http://127.0.0.1:9000" } }
        routes:
          - { name: cs, match: { path_prefix: /cs/ }, upstream: api, case_sensitive: true }
          - { name: all, match: { path_prefix: / }, upstream: api, mode: off }
        """

    private func checkConfig(_ arguments: [String]) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try ProxyIntegrationTests.gatewayBinary())
        process.arguments = ["check-config"] + arguments
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        // A few lines each: neither pipe fills while the other is read.
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(
            status: process.terminationStatus,
            stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: err, as: UTF8.self)
        )
    }

    @Test func strictRefusesAShadowedCaseSensitiveRoute() throws {
        let (directory, policy) = try ProxyIntegrationTests.temporaryPolicy("strict-shadowed", Self.shadowed)
        defer { try? FileManager.default.removeItem(at: directory) }
        let position = "\(policy.path):5:62: routes[0].case_sensitive: route \"cs\" matches case-sensitively"

        let plain = try self.checkConfig([policy.path])
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(plain.stdout.contains("  warning: \(position)"), "\(plain.stdout)")

        let strict = try self.checkConfig(["--strict", policy.path])
        #expect(strict.status == 1)
        #expect(strict.stdout.isEmpty, "\(strict.stdout)")
        let lines = strict.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 2, "\(strict.stderr)")
        #expect(lines.first?.hasPrefix("error: \(position), but GET /CS/x goes to routes[1] (\"all\")") == true)
        #expect(lines.first?.hasSuffix(" [case_sensitive_route_shadowed]") == true)
        #expect(lines.last == "check-config --strict: refused, 1 warning(s)")
    }

    @Test func strictPassesAPolicyWithoutWarnings() throws {
        // The fix the warning names: a case-insensitive enforce route for /cs/ before the catch-all.
        let fixed = Self.shadowed.replacingOccurrences(
            of: "  - { name: all,",
            with: "  - { name: folded, match: { path_prefix: /cs/ }, upstream: api }\n  - { name: all,"
        )
        let (directory, policy) = try ProxyIntegrationTests.temporaryPolicy("strict-clean", fixed)
        defer { try? FileManager.default.removeItem(at: directory) }
        let strict = try self.checkConfig(["--strict", "--config", policy.path])
        #expect(strict.status == 0, "\(strict.stderr)")
        #expect(strict.stderr.isEmpty)
        #expect(strict.stdout.contains("routes (3, first match wins):"), "\(strict.stdout)")
        #expect(!strict.stdout.contains("warning"))
    }

    @Test func helpDescribesStrict() throws {
        let help = try self.checkConfig(["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.hasPrefix("usage: attest-gateway check-config [--strict] FILE | --config FILE"))
        #expect(help.stdout.contains("--strict  refuse a policy that has any warning, of every kind"))
    }
}
