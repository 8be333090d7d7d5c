import Foundation
import GatewayTesting
import Testing

/// `attest-gateway devicecheck …` and `apple check` through the built binary, against
/// `scripts/fake-apple.py` over TLS (`devicecheck_url` and `ca_file` in the policy's `apple:`).
@Suite(.serialized) struct DeviceCheckCommandTests {
    /// Writes a policy whose `apple:` block points at `fake`; returns its path.
    static func policy(_ fake: FakeAppleServer, teamID: String = FakeAppleServer.teamID) throws -> String {
        let path = fake.keys.directory + "/policies.yaml"
        let text =
            ApplePolicyTests.base + """
                environment: production
                apple:
                  team_id: \(teamID)
                  key_id: \(FakeAppleServer.keyID)
                  private_key_file: \(fake.keys.p8)
                  devicecheck_url: https://127.0.0.1:\(fake.port)
                  ca_file: \(fake.caFile)
                  device_check: { timeout: 2s }

                """
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Runs the binary; returns (status, stdout).
    static func run(_ arguments: [String]) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try ProxyIntegrationTests.gatewayBinary())
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines))
    }

    @Test func queryUpdateValidateAndErrors() throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let config = try Self.policy(fake)
        let token = FakeAppleServerTests.token("phone-cli")

        #expect(
            try Self.run(["devicecheck", "query", "--config", config, "--token", token]) == (0, #"{"bits_set":false}"#))
        #expect(
            try Self.run(["devicecheck", "update", "--config", config, "--token", token, "--bit0", "1", "--bit1", "0"])
                == (0, #"{"updated":true}"#))
        let month = String(ISO8601DateFormatter().string(from: Date()).prefix(7))
        #expect(
            try Self.run(["devicecheck", "query", "--config", config, "--token", token])
                == (0, #"{"bit0":true,"bit1":false,"last_update_time":"\#(month)"}"#))
        #expect(
            try Self.run(["devicecheck", "validate", "--config", config, "--token", token]) == (0, #"{"valid":true}"#))

        let bad = Data("invalid:0".utf8).base64EncodedString()
        let (status, output) = try Self.run(["devicecheck", "validate", "--config", config, "--token", bad])
        #expect(status == 1)
        #expect(output.hasPrefix(#"{"error":"apple_bad_request","status":400,"reason":"#))

        try fake.control("/_fake/mode", #"{"delay": 4}"#)
        let (slowStatus, slowOutput) = try Self.run(["devicecheck", "query", "--config", config, "--token", token])
        #expect(slowStatus == 1)
        #expect(slowOutput.hasPrefix(#"{"error":"apple_timeout""#))
        try fake.control("/_fake/mode", "{}")

        // Usage errors exit 2; --help exits 0.
        #expect(
            try Self.run(["devicecheck", "update", "--config", config, "--token", token, "--bit0", "2", "--bit1", "0"])
                .0 == 2)
        #expect(try Self.run(["devicecheck", "query", "--config", config]).0 == 2)
        #expect(try Self.run(["devicecheck", "query", "--help"]).0 == 0)
        #expect(try Self.run(["devicecheck", "--help"]).0 == 0)
    }

    @Test func appleCheckTellsAcceptedFromRefusedCredentials() throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let good = try Self.policy(fake)
        let accepted = try Self.run(["apple", "check", "--config", good])
        #expect(accepted.0 == 0)
        #expect(accepted.1.hasPrefix(#"{"credentials":"accepted","status":"#))
        let wrong = try Self.policy(fake, teamID: "ZZZZZ99999")
        let refused = try Self.run(["apple", "check", "--config", wrong])
        #expect(refused == (1, #"{"credentials":"refused","status":401,"host":"127.0.0.1:\#(fake.port)"}"#))
        #expect(try Self.run(["apple", "check", "--help"]).0 == 0)
    }
}
