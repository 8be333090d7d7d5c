import Foundation

/// scripts/fake-apple.py over TLS with a test CA and a DeviceCheck `.p8` made by `openssl`, for
/// the gateway's `apple:` block (DeviceCheck fallback end to end). Tokens it validates are
/// base64 of `DEVICE:anything`; `invalid…` ones are refused.
final class FakeApple: @unchecked Sendable {
    static let teamID = "ABCDE12345"
    static let keyID = "TESTKEY123"

    let directory: String
    let port: UInt16
    private let child: Child

    var p8: String { self.directory + "/AuthKey.p8" }
    var caFile: String { self.directory + "/ca.pem" }

    init(in scratch: Scratch) async throws {
        let directory = scratch.file("apple")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        self.directory = directory
        let openssl = try Paths.executable("openssl")
        func step(_ arguments: [String]) async throws {
            let result = try await run(openssl, arguments)
            guard result.status == 0 else { throw TestError("openssl \(arguments[0]): \(result.stderr)") }
        }
        let p256 = ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]
        try await step(["genpkey"] + p256 + ["-out", directory + "/AuthKey.p8"])
        try await step(["pkey", "-in", directory + "/AuthKey.p8", "-pubout", "-out", directory + "/public.pem"])
        try await step(["genpkey"] + p256 + ["-out", directory + "/ca.key"])
        try await step([
            "req", "-x509", "-new", "-key", directory + "/ca.key", "-subj", "/CN=fake-apple test CA", "-days", "2",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
            "-out", directory + "/ca.pem",
        ])
        try await step(["genpkey"] + p256 + ["-out", directory + "/server.key"])
        try await step([
            "req", "-new", "-key", directory + "/server.key", "-subj", "/CN=localhost", "-out",
            directory + "/server.csr",
        ])
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n".write(
            toFile: directory + "/server.ext", atomically: true, encoding: .utf8)
        try await step([
            "x509", "-req", "-in", directory + "/server.csr", "-CA", directory + "/ca.pem", "-CAkey",
            directory + "/ca.key", "-CAcreateserial", "-days", "2", "-extfile", directory + "/server.ext", "-out",
            directory + "/server.pem",
        ])
        let port = try freePort()
        self.port = port
        self.child = try Child(
            "fake-apple", try Paths.executable("python3"),
            [
                Paths.repositoryRoot.appendingPathComponent("scripts/fake-apple.py").path, "serve", "--port",
                String(port), "--cert", directory + "/server.pem", "--key", directory + "/server.key",
                "--public-key", directory + "/public.pem", "--team-id", Self.teamID, "--key-id", Self.keyID,
            ],
            in: scratch)
        let child = self.child
        let listening = await eventually(timeout: .seconds(15)) { child.stdout.contains("listening") }
        guard listening else { throw TestError("fake-apple.py did not start: \(child.stderr.suffix(800))") }
    }

    /// The policy's `apple:` block pointing at this fake.
    func policyBlock(tokenTTL: String) -> String {
        """
        apple:
          team_id: \(Self.teamID)
          key_id: \(Self.keyID)
          private_key_file: \(self.p8)
          devicecheck_url: https://127.0.0.1:\(self.port)
          ca_file: \(self.caFile)
          device_check: { timeout: 3s, blocked_bit: bit1, token_ttl: \(tokenTTL) }
        """
    }

    func stop() { self.child.kill() }
}
