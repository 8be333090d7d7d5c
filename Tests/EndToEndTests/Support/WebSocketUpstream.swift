import Foundation
import GatewayTesting

/// `scripts/ws-upstream.py` (Debian's python3-websockets) on free loopback ports: a WebSocket
/// echo server that first reports the handshake it received, with paths that refuse, switch
/// unasked or answer a wrong `Sec-WebSocket-Accept`; and a streaming (server-sent events)
/// server whose events wait for the client's acknowledgement.
final class WebSocketUpstream: @unchecked Sendable {
    let webSocketPort: UInt16
    let streamPort: UInt16
    private let child: ChildProcess

    /// `tls`: certificate and key files; the WebSocket server then speaks TLS.
    init(in directory: TemporaryDirectory, tls: (certificate: String, key: String)? = nil) throws {
        let child = try ChildProcess(
            label: "ws-upstream", executable: "/usr/bin/python3",
            arguments: [E2EPaths.repositoryRoot.appendingPathComponent("scripts/ws-upstream.py").path]
                + (tls.map { ["--tls", $0.certificate, $0.key] } ?? []),
            directory: directory)
        var ports: [UInt16] = []
        eventually(timeout: .seconds(15)) {
            // First stdout line: "listening WS_PORT SSE_PORT".
            if let line = child.stdout.split(separator: "\n").first, line.hasPrefix("listening ") {
                ports = line.split(separator: " ").dropFirst().compactMap { UInt16($0) }
            }
            return ports.count == 2 || !child.isRunning
        }
        guard ports.count == 2 else {
            child.kill()
            throw E2EError("ws-upstream.py did not start: \(child.stdout) \(child.stderr.suffix(600))")
        }
        self.webSocketPort = ports[0]
        self.streamPort = ports[1]
        self.child = child
    }

    func kill() { self.child.kill() }

    /// Every request path the WebSocket server saw (upgrades and plain requests).
    func paths() throws -> [String] {
        let response = try HTTPClient.send(HTTPRequest(port: self.webSocketPort, "GET", "/_paths"))
        guard let paths = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String] else {
            throw E2EError("bad /_paths answer: \(response)")
        }
        return paths
    }
}

/// `scripts/ws-upstream.js` (Debian's node-ws) on a free loopback port: a WebSocket echo server
/// that first reports the handshake it received.
final class NodeWebSocketUpstream: @unchecked Sendable {
    let port: UInt16
    private let child: ChildProcess

    init(in directory: TemporaryDirectory) throws {
        let child = try ChildProcess(
            label: "node-ws-upstream", executable: "/usr/bin/node",
            arguments: [E2EPaths.repositoryRoot.appendingPathComponent("scripts/ws-upstream.js").path],
            directory: directory)
        var port: UInt16?
        eventually(timeout: .seconds(15)) {
            if let line = child.stdout.split(separator: "\n").first, line.hasPrefix("listening ") {
                port = UInt16(line.dropFirst("listening ".count))
            }
            return port != nil || !child.isRunning
        }
        guard let port else {
            child.kill()
            throw E2EError("ws-upstream.js did not start: \(child.stdout) \(child.stderr.suffix(600))")
        }
        self.port = port
        self.child = child
    }

    func kill() { self.child.kill() }

    /// `scripts/ws-client.js URL MESSAGES HEADERS…` to completion: its JSON line.
    static func client(_ url: String, messages: Int, headers: [(String, String)], in directory: TemporaryDirectory)
        throws -> [String: Any]
    {
        let run = try ToolRun.run(
            "/usr/bin/node",
            [E2EPaths.repositoryRoot.appendingPathComponent("scripts/ws-client.js").path, url, String(messages)]
                + headers.map { "\($0.0):\($0.1)" }, in: directory)
        guard let line = run.stdout.split(separator: "\n").last,
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        else { throw E2EError("ws-client.js printed nothing: \(run.stderr.suffix(1500))") }
        return object
    }
}

/// `scripts/ws-client.py`: each run prints JSON lines on stdout.
enum WebSocketClient {
    static var script: String { E2EPaths.repositoryRoot.appendingPathComponent("scripts/ws-client.py").path }

    /// Runs a command to completion; returns its last JSON line.
    static func run(_ arguments: [String], in directory: TemporaryDirectory, timeout: Duration = .seconds(60))
        throws -> [String: Any]
    {
        let run = try ToolRun.run("/usr/bin/python3", [Self.script] + arguments, in: directory, timeout: timeout)
        guard let line = run.stdout.split(separator: "\n").last,
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        else { throw E2EError("ws-client.py \(arguments.first ?? "") printed nothing: \(run.stderr.suffix(1500))") }
        return object
    }

    /// Starts a command that keeps running (`hold`); its stdout grows line by line.
    static func start(_ arguments: [String], in directory: TemporaryDirectory) throws -> ChildProcess {
        try ChildProcess(
            label: "ws-client-\(UInt32.random(in: 0...UInt32.max))", executable: "/usr/bin/python3",
            arguments: [Self.script] + arguments, directory: directory)
    }

    /// The JSON lines a running client printed so far.
    static func lines(_ child: ChildProcess) -> [[String: Any]] {
        child.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }
}
