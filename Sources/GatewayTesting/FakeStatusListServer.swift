// `scripts/fake-google-status.py` for the integration and end-to-end tests.
import Foundation
import Glibc

/// Google's revocation status list server, faked over real TLS for one test: the script makes
/// a throwaway CA (`caFile`, to list as `android.revocation.ca_file`) and serves
/// `GET /attestation/status` with `Cache-Control: public, max-age=N`. The test changes the
/// list and the failure mode through the script's `/_fake/` control endpoints (over `curl`,
/// checking the same CA). Stopped by `stop()`, and by deinit.
package final class FakeStatusListServer: @unchecked Sendable {
    package let port: UInt16
    package let directory: String
    private let process: Process

    package var caFile: String { self.directory + "/tls/ca.pem" }
    /// The list's URL (the certificate names 127.0.0.1 and localhost).
    package var url: String { "https://127.0.0.1:\(self.port)/attestation/status" }

    /// - Parameter entries: serial (lowercase hex) → status (`REVOKED`, `SUSPENDED`).
    package init(entries: [String: String] = [:], maxAge: Int = 3600) throws {
        self.directory = FileManager.default.temporaryDirectory.path + "/fake-google-status-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true)
        try Data(Self.listJSON(entries)).write(to: URL(fileURLWithPath: self.directory + "/list.json"))
        let (process, port) = try FakeHTTPSServer.launch(
            [
                "python3", Repository.root.appendingPathComponent("scripts/fake-google-status.py").path, "serve",
                "--tls-dir", self.directory + "/tls", "--list", self.directory + "/list.json", "--max-age",
                String(maxAge),
            ], name: "fake-google-status.py")
        self.process = process
        self.port = port
    }

    deinit { self.stop() }

    package func stop() {
        FakeHTTPSServer.stop(self.process)
        try? FileManager.default.removeItem(atPath: self.directory)
    }

    /// Google's JSON for `entries` (serial → status, with a reason).
    package static func listJSON(_ entries: [String: String]) -> [UInt8] {
        let object: [String: Any] = [
            "entries": entries.mapValues { ["status": $0, "reason": "KEY_COMPROMISE"] }
        ]
        return Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data())
    }

    /// Serves `entries` from now on.
    package func setEntries(_ entries: [String: String]) throws {
        _ = try self.control("POST", "/_fake/list", body: Self.listJSON(entries))
    }

    /// Answers every list request with `status` (nil: the list again), or closes unanswered.
    package func setFailure(status: Int?, down: Bool = false) throws {
        let statusText = status.map(String.init) ?? "null"
        _ = try self.control("POST", "/_fake/mode", body: Array(#"{"status":\#(statusText),"down":\#(down)}"#.utf8))
    }

    /// List requests seen so far.
    package func listRequests() throws -> Int {
        let body = try self.control("GET", "/_fake/log", body: nil)
        let object = try JSONSerialization.jsonObject(with: body) as? [String: Any]
        return object?["list_requests"] as? Int ?? -1
    }

    private func control(_ method: String, _ path: String, body: [UInt8]?) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        var arguments = ["curl", "-sS", "--fail", "--max-time", "10", "--cacert", self.caFile, "-X", method]
        if let body {
            let file = self.directory + "/control-\(UUID().uuidString).json"
            try Data(body).write(to: URL(fileURLWithPath: file))
            arguments += ["--data-binary", "@" + file]
        }
        process.arguments = arguments + ["https://127.0.0.1:\(self.port)\(path)"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw FakeStatusListError("curl \(method) \(path) exited \(process.terminationStatus)")
        }
        return data
    }
}

package struct FakeStatusListError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
