import AppAttestClient
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One test's world: redis-server, scripts/upstream.py, `attest-gateway serve`, and the
/// simulator CA (`attest-gateway sim init`) the development gateway trusts.
final class GatewayEnvironment: @unchecked Sendable {
    static let appID = "ABCDE12345.com.example.app"

    static let routes = """
          - name: premium
            match: { path_prefix: /v1/premium }
            upstream: api
            mode: enforce
            challenge: required
          - name: body_bound
            match: { path_prefix: /v1/legacy }
            upstream: api
            mode: enforce
            challenge: required
            binding: body
            challenge_field: nonce
          - name: parallel
            match: { path_prefix: /v1/parallel }
            upstream: api
            mode: enforce
            counter_window: 32
          - name: api
            match: { path_prefix: /v1/ }
            upstream: api
            mode: enforce
          - name: watch
            match: { path_prefix: /watch/ }
            upstream: api
            mode: monitor
          - name: public
            match: { path_prefix: /public }
            upstream: api
            mode: off
        """

    let scratch: Scratch
    let binary: String
    let simDirectory: String
    let redisPort: UInt16
    let upstreamPort: UInt16
    let proxyPort: UInt16
    let adminPort: UInt16
    private var redis: Child?
    private var upstream: Child?
    private(set) var gateway: Child?
    private var generation = 0

    var baseURL: URL { URL(string: "http://127.0.0.1:\(self.proxyPort)")! }
    var redisURL: String { "redis://127.0.0.1:\(self.redisPort)/0" }

    /// The gateway's `challenge_ttl_seconds`.
    let challengeTTLSeconds: Int
    /// With `withFakeApple`: Apple's DeviceCheck servers, and a `fallback: devicecheck` route
    /// at `/v1/dc/` whose gateway tokens live `deviceCheckTokenTTL`.
    private(set) var apple: FakeApple?
    private let deviceCheckTokenTTL: String

    init(challengeTTLSeconds: Int = 300, withFakeApple: Bool = false, deviceCheckTokenTTL: String = "1h")
        async throws
    {
        self.challengeTTLSeconds = challengeTTLSeconds
        self.deviceCheckTokenTTL = deviceCheckTokenTTL
        self.scratch = try Scratch()
        self.binary = try Paths.gatewayBinary()
        self.simDirectory = self.scratch.file("sim")
        self.redisPort = try freePort()
        self.upstreamPort = try freePort()
        self.proxyPort = try freePort()
        self.adminPort = try freePort()
        let initialized = try await run(self.binary, ["sim", "init", "--dir", self.simDirectory])
        guard initialized.status == 0 else { throw TestError("sim init: \(initialized.stderr)") }
        try await self.startRedis()
        self.upstream = try Child(
            "upstream",
            try Paths.executable("python3"),
            [
                Paths.repositoryRoot.appendingPathComponent("scripts/upstream.py").path, "--host", "127.0.0.1",
                "--port", String(self.upstreamPort),
            ],
            in: self.scratch
        )
        let listening = await eventually(timeout: .seconds(15)) { (try? await self.upstreamRequests()) != nil }
        guard listening else { throw TestError("upstream.py did not start: \(self.upstream?.stderr ?? "")") }
        if withFakeApple {
            self.apple = try await FakeApple(in: self.scratch)
            self.currentRoutes =
                "  - name: devicecheck\n    match: { path_prefix: /v1/dc/ }\n    upstream: api\n"
                + "    mode: enforce\n    fallback: devicecheck\n" + Self.routes
        }
        try await self.startGateway()
    }

    func shutDown() {
        self.gateway?.kill()
        self.apple?.stop()
        self.upstream?.kill()
        self.redis?.kill()
        self.scratch.remove()
    }

    // MARK: redis-server (AOF on: a restart keeps keys and counters)

    func startRedis() async throws {
        self.generation += 1
        let data = self.scratch.file("redis")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let child = try Child(
            "redis-\(self.generation)",
            try Paths.executable("redis-server"),
            [
                "--port", String(self.redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
                "--appendfsync", "always", "--dir", data, "--daemonize", "no",
            ],
            in: self.scratch
        )
        self.redis = child
        let up = await eventually(timeout: .seconds(10)) {
            (try? await run(try Paths.executable("redis-cli"), ["-p", String(self.redisPort), "ping"]))?.stdout
                .contains("PONG") == true
        }
        guard up else { throw TestError("redis-server did not start: \(child.stdout.suffix(400))") }
    }

    func stopRedis() { self.redis?.kill() }

    // MARK: the gateway

    /// The routes the gateway serves (`routes:` of its policy).
    private(set) var currentRoutes = GatewayEnvironment.routes

    /// Rewrites the policy with `routes` and sends SIGHUP; returns once the policy document
    /// shows the change.
    func reload(routes: String) async throws {
        let before = try await Self.get("http://127.0.0.1:\(self.proxyPort)/app-attest/policy").1
            .value(forHTTPHeaderField: "ETag")
        self.currentRoutes = routes
        _ = try self.scratch.write("policies.yaml", self.policyText())
        self.gateway?.signal(SIGHUP)
        let applied = await eventually(timeout: .seconds(10)) {
            let etag = (try? await Self.get("http://127.0.0.1:\(self.proxyPort)/app-attest/policy"))?.1
                .value(forHTTPHeaderField: "ETag")
            return etag != nil && etag != before
        }
        guard applied else { throw TestError("the gateway did not apply the new policy") }
    }

    private func policyText() -> String {
        """
        listen: 127.0.0.1:\(self.proxyPort)
        admin_listen: 127.0.0.1:\(self.adminPort)
        redis: \(self.redisURL)
        app_ids: ["\(Self.appID)"]
        environment: development
        challenge_ttl_seconds: \(self.challengeTTLSeconds)
        trust_roots: ["\(self.simDirectory)/root_ca.pem"]
        upstreams:
          api: { url: "http://127.0.0.1:\(self.upstreamPort)", max_connections: 32 }
        routes:
        \(self.currentRoutes)
        \(self.apple?.policyBlock(tokenTTL: self.deviceCheckTokenTTL) ?? "")
        """
    }

    func startGateway() async throws {
        self.generation += 1
        let path = try self.scratch.write("policies.yaml", self.policyText())
        let child = try Child("gateway-\(self.generation)", self.binary, ["serve", "--config", path], in: self.scratch)
        self.gateway = child
        let ready = await eventually(timeout: .seconds(20)) {
            guard child.isRunning else { return true }
            return (try? await Self.get("http://127.0.0.1:\(self.adminPort)/readyz"))?.1.statusCode == 200
        }
        guard ready, child.isRunning else { throw TestError("gateway did not start: \(child.stderr.suffix(1500))") }
    }

    func stopGateway() { self.gateway?.kill() }

    /// The gateway's access-log lines of requests it did not answer 2xx (for a failure's message).
    func refusedRequests() -> [String] {
        (self.gateway?.stdout ?? "").split(separator: "\n").map(String.init).filter {
            $0.contains("\"status\":") && !$0.contains("\"status\":2")
        }
    }

    /// `attest-gateway keys revoke KEYID --redis URL`.
    func revoke(_ keyID: String) async throws {
        let result = try await run(self.binary, ["keys", "revoke", keyID, "--redis", self.redisURL])
        guard result.status == 0 else { throw TestError("keys revoke: \(result.stderr)") }
    }

    /// A GET of `target` signed with counter `counter` by a copy of the simulated key (its own
    /// simulator directory, so the client's counter is not moved), sent straight to the gateway.
    func sendForeignAssertion(keyID: String, counter: Int, target: String) async throws {
        let copy = self.scratch.file("sim-copy-\(counter)")
        try FileManager.default.copyItem(atPath: self.simDirectory, toPath: copy)
        let clientData = ClientData.request(method: "GET", target: target, body: Data(), challenge: nil)
        let minted = try await run(
            self.binary,
            [
                "sim", "assert", "--dir", copy, "--key-id", keyID, "--app-id", Self.appID, "--client-data",
                clientData.base64EncodedString(), "--counter", String(counter),
            ]
        )
        let object = try JSONSerialization.jsonObject(with: Data(minted.stdout.utf8)) as? [String: Any]
        guard minted.status == 0, let assertion = object?["assertion"] as? String else {
            throw TestError("sim assert: \(minted.stderr)")
        }
        let (data, response) = try await Self.get(
            "http://127.0.0.1:\(self.proxyPort)\(target)",
            headers: [AttestedClient.Header.keyID: keyID, AttestedClient.Header.assertion: assertion]
        )
        guard response.statusCode == 200 else {
            throw TestError("foreign assertion refused: \(String(decoding: data, as: UTF8.self))")
        }
    }

    /// Requests that reached the upstream so far.
    func upstreamRequests() async throws -> Int {
        let (data, _) = try await Self.get("http://127.0.0.1:\(self.upstreamPort)/_stats")
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        return object?["requests"] as? Int ?? -1
    }

    func url(_ target: String) -> URL { URL(string: "http://127.0.0.1:\(self.proxyPort)\(target)")! }

    static func get(_ url: String, headers: [String: String] = [:]) async throws -> (Data, HTTPURLResponse) {
        var request = URLRequest(url: URL(string: url)!)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return try await URLSessionTransport().send(request)
    }

    /// A client of this gateway, with a simulator-backed service and fast backoff.
    func client(
        service: SimulatorAppAttestService,
        keyStore: InMemoryKeyStore = InMemoryKeyStore(),
        clock: RecordingClock = RecordingClock(),
        deviceCheck: (any DeviceCheckTokenProvider)? = nil,
        configure: (inout AttestedClient.Configuration) -> Void = { _ in }
    ) -> AttestedClient {
        var configuration = AttestedClient.Configuration()
        configuration.enrollmentRetry = RetryPolicy(
            maximumAttempts: 10,
            initialDelay: .milliseconds(200),
            maximumDelay: .seconds(2)
        )
        configuration.requestRetry = RetryPolicy(
            maximumAttempts: 3,
            initialDelay: .milliseconds(100),
            maximumDelay: .seconds(1)
        )
        configuration.enrollmentCooldown = .seconds(2)
        configure(&configuration)
        return AttestedClient(
            gateway: self.baseURL,
            appID: Self.appID,
            service: service,
            keyStore: keyStore,
            deviceCheck: deviceCheck,
            clock: clock,
            configuration: configuration
        )
    }

    func simulator(isSupported: Bool = true) -> SimulatorAppAttestService {
        SimulatorAppAttestService(
            binary: self.binary,
            directory: self.simDirectory,
            appID: Self.appID,
            isSupported: isSupported
        )
    }
}

/// What the upstream echoed: method, target, headers.
struct Echo {
    var method: String
    var target: String
    var headers: [(String, String)]
    var bodySHA256: String

    init(_ data: Data) throws {
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let method = object["method"] as? String, let target = object["target"] as? String,
            let pairs = object["headers"] as? [[String]], let digest = object["body_sha256"] as? String
        else { throw TestError("not an upstream echo: \(String(decoding: data, as: UTF8.self))") }
        self.method = method
        self.target = target
        self.headers = pairs.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }
        self.bodySHA256 = digest
    }

    func value(_ name: String) -> String? {
        self.headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }
}
