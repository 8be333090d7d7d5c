import Foundation
import GatewayTesting

/// `scripts/fake-google-play-integrity.py` over real TLS for one end-to-end test: a throwaway
/// test CA and a `localhost` server certificate, and a service account (an RSA key in Google's
/// JSON layout, its `token_uri` the fake's) whose public key the fake checks assertions with.
/// Its standard tokens are `fake1.` + base64url(verdict JSON).
final class FakeGooglePlayIntegrity: @unchecked Sendable {
    static let clientEmail = "play-integrity@attest-gateway-e2e.iam.gserviceaccount.com"

    let port: UInt16
    let directory: String
    private let child: ChildProcess
    private let files: TemporaryDirectory

    var caFile: String { self.directory + "/ca.pem" }
    var serviceAccountFile: String { self.directory + "/service-account.json" }
    var apiURL: String { "https://localhost:\(self.port)" }

    init(in files: TemporaryDirectory) throws {
        let directory = files.file("fake-google")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let openssl = try E2EPaths.executable("openssl")
        func run(_ arguments: [String]) throws {
            let result = try ToolRun.run(openssl, arguments, in: files)
            guard result.status == 0 else { throw E2EError("openssl \(arguments.first ?? ""): \(result.stderr)") }
        }
        try FakeHTTPSServer.makeCertificates(in: directory, caName: "fake-google test CA")
        try run(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", directory + "/sa.key"])
        try run(["pkey", "-in", directory + "/sa.key", "-pubout", "-out", directory + "/sa.pub.pem"])
        let child = try ChildProcess(
            label: "fake-google",
            executable: try E2EPaths.executable("python3"),
            arguments: [
                E2EPaths.repositoryRoot.appendingPathComponent("scripts/fake-google-play-integrity.py").path, "serve",
                "--cert", directory + "/server.pem", "--key", directory + "/server.key", "--public-key",
                directory + "/sa.pub.pem", "--client-email", Self.clientEmail,
            ],
            directory: files)
        var port: UInt16?
        eventually(timeout: .seconds(15)) {
            if let line = child.stdout.split(separator: "\n").first {
                port = ServerAnnouncement.listeningPort(String(line))
            }
            return port != nil || !child.isRunning
        }
        guard let port else {
            child.kill()
            throw E2EError("fake-google-play-integrity.py did not start: \(child.stderr.suffix(400))")
        }
        self.port = port
        self.directory = directory
        self.child = child
        self.files = files
        let key = try String(contentsOfFile: directory + "/sa.key", encoding: .utf8)
        let account: [String: Any] = [
            "type": "service_account", "project_id": "attest-gateway-e2e", "private_key_id": "e2e0001",
            "private_key": key, "client_email": Self.clientEmail, "token_uri": "https://localhost:\(port)/token",
        ]
        try JSONSerialization.data(withJSONObject: account).write(to: URL(fileURLWithPath: self.serviceAccountFile))
    }

    func kill() { self.child.kill() }

    /// A standard token of this fake for `verdict` (Google's JSON of a verdict).
    static func token(_ verdict: [UInt8]) -> String {
        "fake1."
            + Data(verdict).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// `POST /_fake/mode` (curl over TLS, checked against the test CA).
    func setMode(_ json: String) throws {
        let result = try ToolRun.run(
            try E2EPaths.executable("curl"),
            ["-sS", "--cacert", self.caFile, "-X", "POST", "-d", json, "\(self.apiURL)/_fake/mode"], in: self.files)
        guard result.status == 0 else { throw E2EError("fake mode: \(result.stderr)") }
    }

    /// `GET /_fake/stats`.
    func stats() throws -> [String: Any] {
        let result = try ToolRun.run(
            try E2EPaths.executable("curl"), ["-sS", "--cacert", self.caFile, "\(self.apiURL)/_fake/stats"],
            in: self.files)
        guard result.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        else { throw E2EError("fake stats: \(result.stdout) \(result.stderr)") }
        return object
    }

    /// Decode calls the fake answered with `status`.
    func decodeCalls(_ status: Int) throws -> Int {
        ((try self.stats()["decode"] as? [String: Any])?[String(status)] as? Int) ?? 0
    }
}
