import Foundation
import GatewayTesting
import Glibc

/// The ports a gateway process listens on.
struct GatewayPorts: Sendable {
    var proxy: UInt16
    var admin: UInt16
}

/// `attest-gateway serve --config <file>` as a child process: its policy file (written from
/// a template that receives the chosen ports), its access log (stdout) and operational log
/// (stderr), signals, and helpers for the proxy and admin listeners.
final class GatewayInstance: @unchecked Sendable {
    let name: String
    let ports: GatewayPorts
    let policyPath: String
    let child: ChildProcess
    private let directory: TemporaryDirectory

    /// Writes `policy(ports)` to `<name>.yaml` (or where `place` puts it: it returns the path to
    /// serve) and starts serving it with `serve --config PATH` and `arguments`; returns once the
    /// admin listener answers `/healthz` (and `/readyz` when `waitForReady`). Tries other ports
    /// when the chosen ones were taken in the meantime.
    static func start(
        _ name: String,
        in directory: TemporaryDirectory,
        waitForReady: Bool = true,
        arguments: [String] = [],
        place: ((String) throws -> String)? = nil,
        policy: (GatewayPorts) -> String
    ) throws -> GatewayInstance {
        let binary = try E2EPaths.gatewayBinary()
        var failures: [String] = []
        for attempt in 0..<4 {
            let ports = GatewayPorts(proxy: try freeServerPort(), admin: try freeServerPort())
            guard ports.proxy != ports.admin else { continue }
            let policyPath = try place?(policy(ports)) ?? directory.write("\(name).yaml", policy(ports))
            let child = try ChildProcess(
                label: "\(name)-\(attempt)",
                executable: binary,
                arguments: ["serve", "--config", policyPath] + arguments,
                directory: directory
            )
            let instance = GatewayInstance(
                name: name,
                ports: ports,
                policyPath: policyPath,
                child: child,
                directory: directory
            )
            let up = eventually(timeout: .seconds(20)) {
                guard child.isRunning else { return true }
                guard let response = try? instance.admin("/healthz", timeout: .seconds(2)) else { return false }
                return response.status == 200
            }
            if up && child.isRunning {
                if waitForReady {
                    let ready = eventually(timeout: .seconds(10)) {
                        (try? instance.admin("/readyz", timeout: .seconds(2)))?.status == 200
                    }
                    guard ready else {
                        child.kill()
                        throw E2EError("gateway \(name) never became ready: \(child.stderr.suffix(1500))")
                    }
                }
                return instance
            }
            child.kill()
            failures.append(
                "attempt \(attempt): exit \(child.exitStatus.map(String.init) ?? "-"): \(child.stderr.suffix(600))"
            )
        }
        throw E2EError("gateway \(name) did not start:\n" + failures.joined(separator: "\n"))
    }

    private init(
        name: String,
        ports: GatewayPorts,
        policyPath: String,
        child: ChildProcess,
        directory: TemporaryDirectory
    ) {
        self.name = name
        self.ports = ports
        self.policyPath = policyPath
        self.child = child
        self.directory = directory
    }

    func kill() { self.child.kill() }

    /// A request to the proxy listener.
    func request(
        _ method: String,
        _ target: String,
        headers: [(String, String)] = [],
        body: [UInt8] = [],
        trailers: [(String, String)]? = nil,
        timeout: Duration = .seconds(10)
    ) throws -> HTTPResponse {
        try HTTPClient.send(
            HTTPRequest(port: self.ports.proxy, method, target, headers: headers, body: body, trailers: trailers),
            timeout: timeout
        )
    }

    func request(
        _ method: String,
        _ target: String,
        headers: [(String, String)] = [],
        body: String,
        timeout: Duration = .seconds(10)
    ) throws -> HTTPResponse {
        try self.request(method, target, headers: headers, body: Array(body.utf8), timeout: timeout)
    }

    /// A GET on the admin listener.
    func admin(_ path: String, timeout: Duration = .seconds(5)) throws -> HTTPResponse {
        try HTTPClient.send(HTTPRequest(port: self.ports.admin, "GET", path), timeout: timeout)
    }

    /// `/metrics` parsed: series (`name{labels}` exactly as rendered) → value.
    func metrics() throws -> [String: Double] {
        let response = try self.admin("/metrics")
        guard response.status == 200 else { throw E2EError("/metrics answered \(response)") }
        var series: [String: Double] = [:]
        for line in response.bodyText.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                continue
            }
            series[String(line[..<space])] = value
        }
        return series
    }

    /// `attest_gateway_verdicts_total{route,verdict}` (0 when the series is absent).
    func verdictCount(route: String, verdict: String) throws -> Int {
        Int(try self.metrics()["attest_gateway_verdicts_total{route=\"\(route)\",verdict=\"\(verdict)\"}"] ?? 0)
    }

    /// Replaces the policy file (atomically, by rename) and sends SIGHUP.
    func reload(with text: String) throws {
        let temporary = try self.directory.write("\(self.name).yaml.new", text)
        guard rename(temporary, self.policyPath) == 0 else { throw E2EError("rename: errno \(errno)") }
        self.child.signal(SIGHUP)
    }

    /// Operational log lines (JSON, stderr) whose `event` is `event`, parsed.
    func logEvents(_ event: String) -> [[String: Any]] {
        self.child.stderr.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                object["event"] as? String == event
            else { return nil }
            return object
        }
    }

    /// Access log lines (JSON, stdout), parsed.
    var accessLog: [[String: Any]] {
        self.child.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }
}

/// The policies the tests serve: the DESIGN.md shape, loopback everywhere, the simulator's
/// CA as the one development trust root.
enum TestPolicy {
    static let appID = "ABCDE12345.com.example.app"

    static func yaml(
        ports: GatewayPorts,
        redisURL: String,
        upstreamPort: UInt16,
        trustRoot: String,
        environment: String = "production",
        challengeTTLSeconds: Int = 300,
        extra: String = "",
        routes: String
    ) -> String {
        """
        \(extra)
        listen: 127.0.0.1:\(ports.proxy)
        admin_listen: 127.0.0.1:\(ports.admin)
        redis: \(redisURL)
        app_ids: ["\(appID)"]
        environment: \(environment)
        challenge_ttl_seconds: \(challengeTTLSeconds)
        trust_roots: ["\(trustRoot)"]
        upstreams:
          api: { url: "http://127.0.0.1:\(upstreamPort)", max_connections: 32 }
        endpoints:
          challenge: /app-attest/challenge
          attest: /app-attest/attest
        routes:
        \(routes)
        """
    }
}
