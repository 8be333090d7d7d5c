import Foundation
import GatewayTesting

/// `scripts/upstream.py` on a free loopback port: answers every request with a JSON echo of
/// what it received (method, target, headers in order, body digest); `GET /_stats` counts
/// the requests that reached it.
final class EchoUpstream: @unchecked Sendable {
    let port: UInt16
    private let child: ChildProcess

    init(in directory: TemporaryDirectory) throws {
        let child = try ChildProcess(
            label: "upstream",
            executable: try E2EPaths.executable("python3"),
            arguments: [E2EPaths.upstreamScript, "--host", "127.0.0.1", "--port", "0"],
            directory: directory
        )
        var port: UInt16?
        eventually(timeout: .seconds(15)) {
            // First stdout line: "listening HOST:PORT".
            if let line = child.stdout.split(separator: "\n").first {
                port = ServerAnnouncement.listeningPort(String(line))
            }
            return port != nil || !child.isRunning
        }
        guard let port else {
            child.kill()
            throw E2EError("upstream.py did not start: \(child.stdout) \(child.stderr.suffix(400))")
        }
        self.port = port
        self.child = child
    }

    func kill() { self.child.kill() }

    /// Requests that reached the upstream so far (from `GET /_stats`, which it does not count).
    func requestCount() throws -> Int {
        let response = try HTTPClient.send(HTTPRequest(port: self.port, "GET", "/_stats"))
        guard let count = try response.json()["requests"] as? Int else {
            throw E2EError("bad /_stats answer: \(response)")
        }
        return count
    }
}

/// What the upstream reported it received (the JSON body of its echo).
struct UpstreamEcho {
    var method: String
    var target: String
    var headers: [(String, String)]
    var bodySHA256: String
    /// Trailer fields of a chunked request body as the upstream received them.
    var trailers: [(String, String)]

    init(_ response: HTTPResponse) throws {
        let object = try response.json()
        guard let method = object["method"] as? String, let target = object["target"] as? String,
            let pairs = object["headers"] as? [[String]], let digest = object["body_sha256"] as? String
        else { throw E2EError("not an upstream echo: \(response)") }
        self.method = method
        self.target = target
        self.headers = pairs.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }
        self.bodySHA256 = digest
        self.trailers = ((object["trailers"] as? [[String]]) ?? []).compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }
    }

    func values(_ name: String) -> [String] {
        self.headers.filter { $0.0.lowercased() == name.lowercased() }.map(\.1)
    }

    /// Every header the upstream saw whose name starts with `X-App-` (attestation headers),
    /// lower-cased name → values.
    var appHeaders: [String: [String]] {
        var result: [String: [String]] = [:]
        for (name, value) in self.headers where name.lowercased().hasPrefix("x-app-") {
            result[name.lowercased(), default: []].append(value)
        }
        return result
    }
}
