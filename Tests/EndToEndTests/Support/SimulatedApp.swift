import Foundation
import Simulator
import Verification

/// The app's side of docs/protocol.md, played by the in-process simulator: a device key,
/// its attestation through the gateway's endpoints, and one fresh assertion per request.
final class SimulatedApp: @unchecked Sendable {
    let authority: SimulatorAuthority
    let device: SimulatedDevice
    let appID: String
    let environment: AppAttestEnvironment
    /// The device's last assertion counter (the Secure Enclave's signCount). Test thread only.
    private(set) var counter: UInt32 = 0

    init(authority: SimulatorAuthority, appID: String = TestPolicy.appID, environment: AppAttestEnvironment) throws {
        self.authority = authority
        self.device = try SimulatedDevice.generate()
        self.appID = appID
        self.environment = environment
    }

    /// Standard base64 of the key ID, as `generateKey` returns it.
    var keyID: String { Data(self.device.keyID).base64EncodedString() }

    /// `POST /app-attest/challenge`: the challenge string (asserts nothing about the answer
    /// beyond its shape; callers check status codes where they matter).
    func fetchChallenge(from gateway: GatewayInstance) throws -> String {
        let response = try gateway.request("POST", "/app-attest/challenge")
        guard response.status == 200, let challenge = try response.json()["challenge"] as? String else {
            throw E2EError("challenge endpoint answered \(response)")
        }
        return challenge
    }

    /// The attestation object over SHA256(challenge), as `attestKey` would return it.
    func attestationObject(challenge: String) throws -> [UInt8] {
        try self.authority.attestation(
            for: self.device,
            appID: self.appID,
            clientDataHash: SHA256.hash(Array(challenge.utf8)),
            environment: self.environment
        )
    }

    /// `POST /app-attest/attest` with a fresh challenge; returns the gateway's answer.
    func attest(with gateway: GatewayInstance) throws -> HTTPResponse {
        let challenge = try self.fetchChallenge(from: gateway)
        return try gateway.request(
            "POST",
            "/app-attest/attest",
            headers: [("Content-Type", "application/json")],
            body: Self.attestBody(
                keyID: self.keyID,
                attestation: try self.attestationObject(challenge: challenge),
                challenge: challenge
            )
        )
    }

    static func attestBody(keyID: String, attestation: [UInt8], challenge: String) -> String {
        #"{"key_id":"\#(keyID)","attestation":"\#(Data(attestation).base64EncodedString())","challenge":"\#(challenge)"}"#
    }

    /// clientData under `binding: request` (docs/protocol.md), built here independently of the
    /// gateway's code: "appattest-v1\n" METHOD "\n" target "\n" hex(SHA256(body)) "\n" challenge.
    static func clientData(method: String, target: String, body: [UInt8], challenge: String) -> [UInt8] {
        let digest = SHA256.hash(body).map { String(format: "%02x", $0) }.joined()
        return Array("appattest-v1\n\(method)\n\(target)\n\(digest)\n\(challenge)".utf8)
    }

    /// A new assertion for this request (next counter unless `counter` is given; the device's
    /// counter never goes down, as on a real device).
    func assertion(
        method: String,
        target: String,
        body: [UInt8] = [],
        challenge: String = "",
        counter: UInt32? = nil,
        options: AssertionOptions = .init()
    ) throws -> String {
        try self.assertion(
            clientData: Self.clientData(method: method, target: target, body: body, challenge: challenge),
            counter: counter,
            options: options
        )
    }

    /// A new assertion over any clientData (under `binding: body`, the raw request body).
    func assertion(clientData: [UInt8], counter: UInt32? = nil, options: AssertionOptions = .init()) throws -> String {
        let use = counter ?? (self.counter + 1)
        self.counter = max(self.counter, use)
        let object = try self.device.assertion(
            clientDataHash: SHA256.hash(clientData),
            appID: self.appID,
            counter: use,
            options: options
        )
        return Data(object).base64EncodedString()
    }

    /// The protocol headers for a request carrying `assertion`.
    func headers(assertion: String, challenge: String? = nil, keyID: String? = nil) -> [(String, String)] {
        var headers = [("X-App-Attest-Key-Id", keyID ?? self.keyID), ("X-App-Assertion", assertion)]
        if let challenge { headers.append(("X-App-Attest-Challenge", challenge)) }
        return headers
    }

    /// Signs and sends one request to `gateway` (a fresh assertion; a fresh challenge when
    /// `challengeRequired`).
    func send(
        _ method: String,
        _ target: String,
        body: [UInt8] = [],
        challengeRequired: Bool = false,
        extraHeaders: [(String, String)] = [],
        to gateway: GatewayInstance,
        timeout: Duration = .seconds(10)
    ) throws -> HTTPResponse {
        let challenge = challengeRequired ? try self.fetchChallenge(from: gateway) : nil
        let assertion = try self.assertion(method: method, target: target, body: body, challenge: challenge ?? "")
        return try gateway.request(
            method,
            target,
            headers: self.headers(assertion: assertion, challenge: challenge) + extraHeaders,
            body: body,
            timeout: timeout
        )
    }
}

/// One test's world: a temporary directory, the simulator CA written into it (the policy's
/// trust root), Redis, the echo upstream, and the gateways the test starts. `shutDown()`
/// SIGKILLs every process and removes the directory.
final class E2EWorld: @unchecked Sendable {
    /// For the 1,000-copy races: they prove that exactly one copy passes (atomicity), not that
    /// Redis answers within the production 250 ms under a 2-core machine's full load.
    static let raceLimits = "limits: { store_command_timeout: 3s }"

    let directory: TemporaryDirectory
    let authority: SimulatorAuthority
    let trustRootPath: String
    let redis: RedisInstance
    let upstream: EchoUpstream
    private var gateways: [GatewayInstance] = []

    init() throws {
        let directory = try TemporaryDirectory()
        self.directory = directory
        do {
            let simDirectory = directory.file("sim")
            self.authority = try SimulatorAuthority.generate()
            try self.authority.save(directory: simDirectory)
            self.trustRootPath = (simDirectory as NSString).appendingPathComponent(
                SimulatorAuthority.FileName.rootCertificate
            )
            self.redis = try RedisInstance.start(in: directory)
            self.upstream = try EchoUpstream(in: directory)
        } catch {
            directory.remove()
            throw error
        }
    }

    /// A gateway serving `TestPolicy.yaml` with this world's Redis, upstream and CA.
    func startGateway(
        _ name: String,
        environment: String = "production",
        challengeTTLSeconds: Int = 300,
        waitForReady: Bool = true,
        extra: String = "",
        arguments: [String] = [],
        place: ((String) throws -> String)? = nil,
        routes: String
    ) throws -> GatewayInstance {
        let gateway = try GatewayInstance.start(
            name, in: self.directory, waitForReady: waitForReady, arguments: arguments, place: place
        ) { ports in
            self.policy(
                ports: ports,
                environment: environment,
                challengeTTLSeconds: challengeTTLSeconds,
                extra: extra,
                routes: routes
            )
        }
        self.gateways.append(gateway)
        return gateway
    }

    func policy(
        ports: GatewayPorts,
        environment: String = "production",
        challengeTTLSeconds: Int = 300,
        redisURL: String? = nil,
        extra: String = "",
        routes: String
    ) -> String {
        TestPolicy.yaml(
            ports: ports,
            redisURL: redisURL ?? self.redis.url,
            upstreamPort: self.upstream.port,
            trustRoot: self.trustRootPath,
            environment: environment,
            challengeTTLSeconds: challengeTTLSeconds,
            extra: extra,
            routes: routes
        )
    }

    func app(environment: AppAttestEnvironment = .production) throws -> SimulatedApp {
        try SimulatedApp(authority: self.authority, environment: environment)
    }

    /// `attest-gateway <arguments>` run to completion in this world's directory.
    func runGateway(_ arguments: [String]) throws -> ToolRun {
        try ToolRun.run(try E2EPaths.gatewayBinary(), arguments, in: self.directory)
    }

    func shutDown() {
        for gateway in self.gateways { gateway.kill() }
        self.upstream.kill()
        self.redis.kill()
        self.directory.remove()
    }

    deinit {
        self.shutDown()
    }
}
