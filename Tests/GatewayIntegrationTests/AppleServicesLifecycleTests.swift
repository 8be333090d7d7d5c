import Foundation
import GatewayTesting
import Testing

@testable import AppleClient
@testable import GatewayIO
@testable import GatewayServe
@testable import KeyStore
@testable import OutboundHTTP
@testable import PolicyModel
@testable import RedisClient

/// `serve`'s Apple services across builds and reloads (`EnforcementGateFactory`): the sweeper
/// runs and refreshes a due key through the fake; a reload with the same `apple:` keeps the
/// same client and sweeper, a changed one replaces them, a policy without `apple:` stops them.
@Suite(.serialized, .timeLimit(.minutes(1))) struct AppleServicesLifecycleTests {
    @Test func theSweeperRunsAndReloadsNeverDoubleIt() async throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        try fake.control("/_fake/script", #"[{"status":304}]"#)
        let redis = try RedisServer.start()
        defer { redis.shutDown() }
        var policy = EnforcementHarness.gatewayPolicy(store: .redis(url: redis.urlString()))
        var apple = AppleConfiguration(
            teamID: FakeAppleServer.teamID, keyID: FakeAppleServer.keyID, privateKeyFile: fake.keys.p8,
            environment: .production, attestDataOverride: OutboundOrigin(host: "127.0.0.1", port: fake.port),
            caFile: fake.caFile)
        apple.fraudRisk.isEnabled = true
        apple.fraudRisk.sweepInterval = .milliseconds(100)
        policy.apple = apple
        let loop = try EventLoop(index: 0)
        let factory = EnforcementGateFactory(registry: MetricsRegistry(), loops: [loop])
        defer { factory.shutdownApple() }
        _ = try factory.makeGates(for: policy)
        let running = try #require(factory.appleServices)
        #expect(running.sweeper != nil)

        // A due key is refreshed by the running sweeper, with no call from the test.
        let store = RedisStore(url: try RedisURL(parsing: redis.urlString()))
        defer { store.close() }
        let record = KeyRecord(
            keyID: "a2V5LXN3ZWVw", publicKey: [4] + [UInt8](repeating: 1, count: 64), counter: 0,
            appID: EnforcementHarness.appID, environment: "production", receipt: [1, 2, 3], attestedAt: Date())
        #expect(await store.createKey(record).value == .created)
        _ = await withCheckedContinuation { continuation in
            store.scheduleFraudRisk(keyID: record.keyID, at: Date()) { continuation.resume(returning: $0) }
        }
        #expect(
            try eventually {
                try fake.requestLog().contains { $0.path == "/v1/attestationData" }
            })

        // Same apple: and store: the same services. Changed apple: new ones, the old stopped.
        _ = try factory.makeGates(for: policy)
        #expect(factory.appleServices === running)
        policy.apple?.fraudRisk.requestsPerSecond = 20
        _ = try factory.makeGates(for: policy)
        let replaced = try #require(factory.appleServices)
        #expect(replaced !== running)
        #expect(replaced.configuration.fraudRisk.requestsPerSecond == 20)

        // No apple: nothing runs.
        policy.apple = nil
        _ = try factory.makeGates(for: policy)
        #expect(factory.appleServices == nil)
        // Fraud risk off: a client (for DeviceCheck) but no sweeper.
        apple.fraudRisk.isEnabled = false
        policy.apple = apple
        _ = try factory.makeGates(for: policy)
        #expect(factory.appleServices?.sweeper == nil)
        #expect(factory.appleServices?.client != nil)
    }

    @Test func anUnreadablePrivateKeyFailsTheBuild() throws {
        var policy = EnforcementHarness.gatewayPolicy()
        policy.apple = AppleConfiguration(
            teamID: FakeAppleServer.teamID, keyID: FakeAppleServer.keyID, privateKeyFile: "/nonexistent/key.p8",
            environment: .production)
        let loop = try EventLoop(index: 0)
        let factory = EnforcementGateFactory(registry: MetricsRegistry(), loops: [loop])
        #expect(throws: EnforcementGateFactory.BuildError.self) { try factory.makeGates(for: policy) }
        #expect(factory.appleServices == nil)
        // Without loops (tools), the block is not acted on at all.
        #expect(throws: Never.self) { try EnforcementGateFactory(registry: MetricsRegistry()).makeGates(for: policy) }
    }
}
