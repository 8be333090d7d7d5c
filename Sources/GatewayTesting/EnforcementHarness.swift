package import Enforcement
// An `AttestGate` over a fault-injecting MemoryStore (or a given store), with the simulator's CA
// and devices and the real verifiers: the unit tests' flow harness, and the integration tests'
// over Redis and the Apple fakes.
package import Foundation
package import GateContract
import GatewayIO
package import HTTP1
package import KeyStore
package import PolicyModel
package import Simulator
package import Verification

/// The harness's own failures (it cannot record test issues: no test framework here).
package struct HarnessFailure: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// The gate under test, its store and metrics, and the requests a simulated device sends.
package struct EnforcementHarness {
    package static let appID = "ABCDE12345.com.example.app"
    package static let authority: SimulatorAuthority = {
        do { return try SimulatorAuthority.generate() } catch { fatalError("simulator CA: \(error)") }
    }()

    /// The store under test (MemoryStore unless a test passes another).
    package let backing: any AttestStore
    package let store: FaultInjectingStore
    package let metrics = RecordingGateMetrics()
    package let gate: AttestGate

    package static let routes: [RoutePolicy] = [
        RoutePolicy(
            name: "premium",
            match: .init(pathPrefix: "/v1/premium", methods: ["GET", "POST"]),
            upstream: "api",
            mode: .enforce,
            challenge: .required,
            binding: .request
        ),
        RoutePolicy(
            name: "legacy",
            match: .init(pathPrefix: "/v1/legacy"),
            upstream: "api",
            mode: .enforce,
            challenge: .required,
            binding: .body,
            challengeField: "nonce"
        ),
        RoutePolicy(
            name: "legacy-plain",
            match: .init(pathPrefix: "/v1/plain"),
            upstream: "api",
            mode: .enforce,
            challenge: .none,
            binding: .body
        ),
        RoutePolicy(name: "watch", match: .init(pathPrefix: "/v1/watch"), upstream: "api", mode: .monitor),
        RoutePolicy(
            name: "lenient",
            match: .init(pathPrefix: "/v1/lenient"),
            upstream: "api",
            mode: .enforce,
            onStoreError: .allow
        ),
        RoutePolicy(
            name: "api",
            match: .init(pathPrefix: "/v1/"),
            upstream: "api",
            mode: .enforce,
            maxBodyBytes: 1024
        ),
        RoutePolicy(name: "public", match: .init(pathPrefix: "/public"), upstream: "api", mode: .off),
    ]

    package static func policy(environment: EnvironmentPolicy = .production) -> GatewayPolicy {
        GatewayPolicy(
            listen: [ListenAddress(host: "127.0.0.1", port: 8080)],
            appIDs: [Self.appID],
            environment: environment,
            challengeTTLSeconds: 300,
            upstreams: ["api": UpstreamConfiguration(name: "api", host: "127.0.0.1", port: 9000)],
            routes: Self.routes
        )
    }

    package init(
        environment: EnvironmentPolicy = .production, backing: any AttestStore = MemoryStore(),
        now: @escaping @Sendable () -> Date = { Date() },
        monotonicNanoseconds: @escaping @Sendable () -> UInt64 = { SystemCalls.monotonicNanoseconds() }
    ) throws {
        self.backing = backing
        self.store = FaultInjectingStore(wrapping: backing)
        self.gate = try AttestGate(
            policy: Self.policy(environment: environment),
            store: self.store,
            trustRootsPEM: [Self.authority.rootCertificatePEM],
            metrics: self.metrics,
            now: now,
            monotonicNanoseconds: monotonicNanoseconds
        )
    }

    /// Another gate (empty key cache) over the same store, e.g. after a reload.
    package func sibling(environment: EnvironmentPolicy = .production) throws -> EnforcementHarness {
        try EnforcementHarness(environment: environment, backing: self.backing)
    }

    package func challenge() async throws -> String {
        let (_, decision, _) = await runGate(self.gate, request("POST", "/app-attest/challenge"))
        guard decision.status == 200, let challenge = decision.json?["challenge"] as? String else {
            throw HarnessFailure("the challenge endpoint answered \(decision.status.map(String.init) ?? "a forward")")
        }
        return challenge
    }

    package func attestBody(
        _ device: SimulatedDevice, challenge: String, environment: AppAttestEnvironment = .production
    )
        throws -> [UInt8]
    {
        let attestation = try Self.authority.attestation(
            for: device,
            appID: Self.appID,
            clientDataHash: SHA256.hash(Array(challenge.utf8)),
            environment: environment
        )
        let json = JSONText.object([
            ("key_id", JSONText.quote(Data(device.keyID).base64EncodedString())),
            ("attestation", JSONText.quote(Data(attestation).base64EncodedString())),
            ("challenge", JSONText.quote(challenge)),
        ])
        return Array(json.utf8)
    }

    /// challenge → attest; returns the attest endpoint's decision.
    package func attest(_ device: SimulatedDevice, environment: AppAttestEnvironment = .production) async throws
        -> GateDecision
    {
        let challenge = try await self.challenge()
        let body = try self.attestBody(device, challenge: challenge, environment: environment)
        return await runGate(self.gate, request("POST", "/app-attest/attest"), body: body).1
    }

    /// A request signed the way the protocol says (`binding: request`).
    package static func signed(
        _ device: SimulatedDevice,
        counter: UInt32,
        method: String,
        target: String,
        body: [UInt8] = [],
        challenge: String? = nil,
        extraHeaders: [(String, String)] = []
    ) throws -> HTTPRequestHead {
        let clientData = ClientData.canonical(method: method, target: target, body: body, challenge: challenge ?? "")
        return try Self.signed(
            device,
            counter: counter,
            clientData: clientData,
            method: method,
            target: target,
            challengeHeader: challenge,
            extraHeaders: extraHeaders
        )
    }

    /// A request whose assertion signs `clientData` exactly.
    package static func signed(
        _ device: SimulatedDevice,
        counter: UInt32,
        clientData: [UInt8],
        method: String,
        target: String,
        challengeHeader: String? = nil,
        extraHeaders: [(String, String)] = [],
        keyID: [UInt8]? = nil
    ) throws -> HTTPRequestHead {
        let assertion = try device.assertion(
            clientDataHash: SHA256.hash(clientData),
            appID: Self.appID,
            counter: counter
        )
        var headers: [(String, String)] = [
            ("X-App-Attest-Key-Id", Data(keyID ?? device.keyID).base64EncodedString()),
            ("X-App-Assertion", Data(assertion).base64EncodedString()),
        ]
        if let challengeHeader { headers.append(("X-App-Attest-Challenge", challengeHeader)) }
        return request(method, target, headers: headers + extraHeaders)
    }
}

extension EnforcementHarness {
    /// A gateway policy with the harness's routes and app ID, for `EnforcementGateFactory`.
    package static func gatewayPolicy(store: StoreConfiguration = .memory, trustRoots: [String] = []) -> GatewayPolicy {
        GatewayPolicy(
            listen: [ListenAddress(host: "127.0.0.1", port: 0)],
            store: store,
            appIDs: [Self.appID],
            environment: .production,
            trustRoots: trustRoots,
            upstreams: ["api": UpstreamConfiguration(name: "api", host: "127.0.0.1", port: 9)],
            routes: Self.routes
        )
    }
}
