import Foundation
import GatewayTesting
import Glibc

@testable import HTTP1
@testable import PolicyModel

/// `scripts/upstream.py` started on a free loopback port for one test; stopped by `stop()`
/// (and by deinit, so a failing test never leaves it running).
final class UpstreamProcess: @unchecked Sendable {
    let process: Process
    let port: UInt16
    private let output: Pipe

    static var scriptPath: String {
        // Tests/GatewayIntegrationTests/Support/UpstreamProcess.swift → repository root.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent("scripts/upstream.py").path
    }

    init(port: UInt16 = 0) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", Self.scriptPath, "--host", "127.0.0.1", "--port", String(port)]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        self.output = output
        let text = ServerAnnouncement.firstLine(of: output.fileHandleForReading)
        guard let bound = ServerAnnouncement.listeningPort(text) else {
            process.terminate()
            throw TestFailure("upstream.py did not start: \(text)")
        }
        self.port = bound
    }

    var configuration: UpstreamConfiguration {
        UpstreamConfiguration(name: "api", host: "127.0.0.1", port: self.port, maxConnections: 8)
    }

    /// SIGKILL: a test upstream has nothing to flush, and SIGTERM can be ignored (SIG_IGN is
    /// inherited through exec), which once hung the whole test run at exit (from deinit).
    func stop() {
        guard self.process.isRunning else { return }
        kill(self.process.processIdentifier, SIGKILL)
        self.process.waitUntilExit()
    }

    deinit {
        self.stop()
    }

    /// `GET /_stats` straight to the upstream: connections accepted, requests served, open now.
    func stats() throws -> (connections: Int, requests: Int, open: Int) {
        let response = try TestHTTPClient.request(
            port: self.port, "GET /_stats HTTP/1.1\r\nHost: up\r\nConnection: close\r\n\r\n")
        let object = try response.json()
        guard let connections = object["connections"] as? Int, let requests = object["requests"] as? Int,
            let open = object["open"] as? Int
        else { throw TestFailure("bad stats \(response.bodyText)") }
        return (connections, requests, open)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
