import Foundation
import GatewayTesting
import Glibc

@testable import AppleClient
@testable import OutboundHTTP

/// `scripts/fake-apple.py` over real TLS for one test: a throwaway test CA and a server
/// certificate for `localhost` / 127.0.0.1, an Apple key pair (`AppleTestKeys`) whose public
/// half the fake checks JWTs against. `exchange` is the tests' plain blocking client: the
/// request's bytes go over TLS through the script's `exchange` command (which checks the
/// server certificate against the test CA), and the raw answer comes back through
/// `OutboundResponseReader`. Stopped by `stop()`, and by deinit.
final class FakeAppleServer: @unchecked Sendable {
    static let teamID = "ABCDE12345"
    static let keyID = "TESTKEY123"

    let keys: AppleTestKeys
    let port: UInt16
    private let process: Process

    var caFile: String { self.keys.directory + "/ca.pem" }
    var override: OutboundOrigin { OutboundOrigin(host: "localhost", port: self.port) }

    static var scriptPath: String {
        Repository.root.appendingPathComponent("scripts/fake-apple.py").path
    }

    init(script: String? = nil) throws {
        let keys = try AppleTestKeys()
        let directory = keys.directory
        do {
            try FakeHTTPSServer.makeCertificates(in: directory, caName: "fake-apple test CA")
        } catch {
            keys.remove()
            throw error
        }
        var arguments = [
            "python3", Self.scriptPath, "serve", "--cert", directory + "/server.pem", "--key",
            directory + "/server.key", "--public-key", keys.publicPEM, "--team-id", Self.teamID, "--key-id",
            Self.keyID,
        ]
        if let script {
            try script.write(toFile: directory + "/script.json", atomically: true, encoding: .utf8)
            arguments += ["--script", directory + "/script.json"]
        }
        let started: (process: Process, port: UInt16)
        do {
            started = try FakeHTTPSServer.launch(arguments, name: "fake-apple.py")
        } catch {
            keys.remove()
            throw error
        }
        self.keys = keys
        self.port = started.port
        self.process = started.process
    }

    deinit { self.stop() }

    func stop() {
        FakeHTTPSServer.stop(self.process)
        self.keys.remove()
    }

    /// The JWT signer the fake trusts.
    func signer(teamID: String = FakeAppleServer.teamID, keyID: String = FakeAppleServer.keyID) throws -> AppleJWT {
        try AppleJWT.load(teamID: teamID, keyID: keyID, privateKeyFile: self.keys.p8)
    }

    /// Sends `bytes` over TLS and reads one answer; nil when the server closed without one.
    func exchange(_ bytes: [UInt8], caFile: String? = nil) throws -> OutboundHTTPResponse? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", Self.scriptPath, "exchange", "--port", String(self.port), "--ca", caFile ?? self.caFile,
        ]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data(bytes))
        try input.fileHandleForWriting.close()
        let raw = [UInt8](output.fileHandleForReading.readDataToEndOfFile())
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestFailure("exchange failed with status \(process.terminationStatus)")
        }
        var reader = OutboundResponseReader(peer: .apple)
        reader.expectResponse()
        if let response = try reader.feed(raw) { return response }
        return try reader.peerClosed()
    }

    /// Sends `request` with a fresh JWT from `signer` (or the given token).
    func send(_ request: OutboundHTTPRequest, jwt: String? = nil) throws -> OutboundHTTPResponse? {
        let token = try jwt ?? self.signer().token(issuedAt: Date())
        return try self.exchange(request.serialized(token: token))
    }

    /// POSTs JSON to a `/_fake/...` control path.
    func control(_ path: String, _ json: String) throws {
        let body = Array(json.utf8)
        let head = "POST \(path) HTTP/1.1\r\nHost: localhost\r\nContent-Length: \(body.count)\r\n\r\n"
        let response = try self.exchange(Array(head.utf8) + body)
        guard response?.status == 200 else { throw TestFailure("control \(path) failed") }
    }
}

extension FakeAppleServer {
    /// The receipt vector `id` of Tests/VerificationTests/Fixtures/receipts.json (real receipts).
    static func receiptVector(_ id: String) throws -> [String: Any] {
        let data = try Data(
            contentsOf: Repository.root.appendingPathComponent("Tests/VerificationTests/Fixtures/receipts.json"))
        let vectors = (try JSONSerialization.jsonObject(with: data) as? [String: Any])?["vectors"] as? [[String: Any]]
        guard let vector = vectors?.first(where: { $0["id"] as? String == id }) else {
            throw TestFailure("no receipt vector \(id) in receipts.json")
        }
        return vector
    }

    /// Writes `vector`'s receipt into the fake's directory, for a script's `receipt_file`: its path.
    func receiptFile(for vector: [String: Any]) throws -> String {
        let path = self.keys.directory + "/receipt.b64"
        try (vector["receipt"] as? String ?? "").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
