import Foundation
import GatewayTesting
import Glibc

/// A gateway worth looking at, for the dashboard and console tests: routes in each mode, an
/// `apple:` block (its breaker gauge exported; Apple never called), a check-only listener on TLS
/// (its certificate's expiry exported; never asked), and traffic of every kind
/// the panels show: challenges and an attestation, verified, refused (missing credentials, a
/// lower-case method, an ambiguous target), forwarded passthrough, monitored and a store error.
struct ObservedGateway {
    static let routes = """
          - name: strict
            match: { path_prefix: /strict }
            upstream: api
            mode: enforce
          - name: watched
            match: { path_prefix: /watched }
            upstream: api
            mode: monitor
          - name: public
            match: { path_prefix: /public }
            upstream: api
            mode: off
        """

    let world: E2EWorld
    let gateway: GatewayInstance
    let app: SimulatedApp

    /// Starts the gateway with an `apple:` block whose key is made here (`openssl genpkey`).
    init(_ world: E2EWorld) throws {
        let key = world.directory.file("AuthKey_KEY1234567.p8")
        let run = try ToolRun.run(
            try E2EPaths.executable("openssl"),
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key],
            in: world.directory)
        guard run.status == 0 else { throw E2EError("openssl genpkey: \(run.stderr)") }
        let directory = world.directory.path
        let certificate = try ToolRun.run(
            try E2EPaths.executable("openssl"),
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", "\(directory)/authz.key", "-out", "\(directory)/authz.pem", "-days", "30",
                "-subj", "/CN=localhost",
            ], in: world.directory)
        guard certificate.status == 0 else { throw E2EError("openssl req: \(certificate.stderr)") }
        let authzPort = try freeServerPort()
        let apple = """
            authz_listen:
              address: 127.0.0.1:\(authzPort)
              tls: { certificate: \(directory)/authz.pem, private_key: \(directory)/authz.key }
            apple:
              team_id: ABCDE12345
              key_id: KEY1234567
              private_key_file: \(key)
              devicecheck_url: https://127.0.0.1:9
            """
        self.world = world
        self.gateway = try world.startGateway("observed", extra: apple, routes: Self.routes)
        self.app = try world.app()
    }

    /// One round of every kind of request; `storeError` pauses Redis for one protected request.
    func traffic(storeError: Bool) throws {
        guard try self.app.attest(with: self.gateway).status == 201 else { throw E2EError("attest failed") }
        for index in 0..<3 {
            let verified = try self.app.send("GET", "/strict/v\(index)", to: self.gateway)
            guard verified.status == 200 else { throw E2EError("verified request answered \(verified)") }
        }
        _ = try self.app.send("GET", "/watched/ok", to: self.gateway)
        _ = try self.gateway.request("GET", "/watched/no-credentials")
        _ = try self.gateway.request("GET", "/strict/no-credentials")
        _ = try self.gateway.request("get", "/public/lower-case")
        _ = try self.gateway.request("GET", "/public//ambiguous")
        for index in 0..<3 { _ = try self.gateway.request("GET", "/public/p\(index)") }
        if storeError {
            self.world.redis.pause()
            defer { self.world.redis.resume() }
            _ = try self.app.send("GET", "/strict/while-redis-sleeps", to: self.gateway)
        }
    }
}

/// `prometheus` scraping one target every second, with its own configuration and storage in the
/// test's directory, on a free loopback port.
final class PrometheusInstance: @unchecked Sendable {
    let port: UInt16
    let child: ChildProcess

    init(scraping target: String, in directory: TemporaryDirectory) throws {
        let config = try directory.write(
            "prometheus.yml",
            """
            global: { scrape_interval: 1s, evaluation_interval: 1s }
            scrape_configs:
              - job_name: attest-gateway
                static_configs: [{ targets: ["\(target)"] }]

            """)
        var lastError = ""
        for attempt in 0..<3 {
            let port = try freeServerPort()
            let child = try ChildProcess(
                label: "prometheus-\(attempt)", executable: try E2EPaths.executable("prometheus"),
                arguments: [
                    "--config.file=\(config)", "--storage.tsdb.path=\(directory.file("prometheus-data-\(attempt)"))",
                    "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn",
                ],
                directory: directory)
            let ready = eventually(timeout: .seconds(20)) {
                guard child.isRunning else { return true }
                return (try? HTTPClient.send(HTTPRequest(port: port, "GET", "/-/ready")))?.status == 200
            }
            if ready && child.isRunning {
                self.port = port
                self.child = child
                return
            }
            lastError = child.stderr.suffix(600).description
            child.kill()
        }
        throw E2EError("prometheus did not start: \(lastError)")
    }

    func kill() { self.child.kill() }

    /// `GET /api/v1/query`: the result vector (or matrix) of an instant query.
    func query(_ expression: String) throws -> [[String: Any]] {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let encoded = expression.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
        let response = try HTTPClient.send(HTTPRequest(port: self.port, "GET", "/api/v1/query?query=\(encoded)"))
        let json = try response.json()
        guard response.status == 200, json["status"] as? String == "success",
            let data = json["data"] as? [String: Any], let result = data["result"] as? [[String: Any]]
        else { throw E2EError("query \(expression) answered \(response.status): \(response.bodyText.prefix(400))") }
        return result
    }
}
