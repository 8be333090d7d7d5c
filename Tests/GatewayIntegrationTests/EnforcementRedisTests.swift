import Foundation
import GatewayTesting
import Simulator
import Testing
import Verification

@testable import GateContract
@testable import GatewayServe
@testable import HTTP1
@testable import KeyStore
@testable import RedisClient

/// The gate over `RedisStore` on a real redis-server (loopback, one process per test):
/// the store is the authority shared by several gateway instances.
@Suite(.timeLimit(.minutes(1))) struct EnforcementRedisTests {
    static func redisStore(_ redis: RedisServer, commandTimeout: Duration = .milliseconds(250)) throws -> RedisStore {
        RedisStore(
            url: try RedisURL(parsing: redis.urlString()),
            configuration: RedisConfiguration(commandTimeout: commandTimeout, connectTimeout: .milliseconds(500))
        )
    }

    @Test func flowAcrossTwoInstancesSharingRedis() async throws {
        let redis = try RedisServer.start()
        defer { redis.shutDown() }
        let storeA = try Self.redisStore(redis)
        let storeB = try Self.redisStore(redis)
        defer {
            storeA.close()
            storeB.close()
        }
        let a = try EnforcementHarness(backing: storeA)
        let b = try EnforcementHarness(backing: storeB)
        let device = try SimulatedDevice.generate()

        // Challenge from A, attestation on B.
        let challenge = try await a.challenge()
        let attestBody = try a.attestBody(device, challenge: challenge)
        let attested = await runGate(b.gate, request("POST", "/app-attest/attest"), body: attestBody).1
        #expect(attested.status == 201)
        #expect(
            await runGate(a.gate, request("POST", "/app-attest/attest"), body: attestBody).1.errorCode
                == "challenge_invalid"
        )

        // A challenge-bound request verified on A; its challenge cannot be reused on B.
        let premiumChallenge = try await b.challenge()
        let first = try EnforcementHarness.signed(
            device,
            counter: 1,
            method: "GET",
            target: "/v1/premium/x",
            challenge: premiumChallenge
        )
        #expect(await runGate(a.gate, first).1.forwardedHead?.headers["X-App-Attest-Status"] == "verified")
        let reuse = try EnforcementHarness.signed(
            device,
            counter: 2,
            method: "GET",
            target: "/v1/premium/x",
            challenge: premiumChallenge
        )
        #expect(await runGate(b.gate, reuse).1.errorCode == "challenge_invalid")

        // 40 concurrent copies of one assertion over both instances: exactly one passes.
        let head = try EnforcementHarness.signed(device, counter: 10, method: "POST", target: "/v1/transfer")
        let gates = [a.gate, b.gate]
        let decisions = await withTaskGroup(of: GateDecision.self) { group in
            for i in 0..<40 {
                group.addTask { await runGate(gates[i % 2], head, body: []).1 }
            }
            var all: [GateDecision] = []
            for await decision in group { all.append(decision) }
            return all
        }
        #expect(decisions.filter { $0.forwardedHead != nil }.count == 1)
        #expect(decisions.filter { $0.errorCode == "counter_replay" }.count == 39)

        // Revocation on the shared store reaches an instance that has the key cached.
        let revoked = await withCheckedContinuation { continuation in
            storeB.revokeKey(keyID: Data(device.keyID).base64EncodedString()) { continuation.resume(returning: $0) }
        }
        #expect((try? revoked.get()) == true)
        let afterRevoke = try EnforcementHarness.signed(device, counter: 11, method: "GET", target: "/v1/a")
        #expect(await runGate(a.gate, afterRevoke).1.errorCode == "revoked_key")
    }

    @Test func storeStateIsExportedForMetrics() async throws {
        let redis = try RedisServer.start()
        defer { redis.shutDown() }
        let store = try Self.redisStore(redis)
        defer { store.close() }
        // Wait (bounded) for the connection to be ready: one ping round trip.
        let pinged = await withCheckedContinuation { continuation in
            store.ping { continuation.resume(returning: $0) }
        }
        #expect((try? pinged.get()) != nil)
        let text = EnforcementGateFactory.storeMetricsText(store)
        #expect(text.contains("attest_gateway_store_ready 1\n"))
        #expect(text.contains("attest_gateway_store_connect_attempts_total 1\n"))
        #expect(text.contains("attest_gateway_store_command_timeouts_total 0\n"))
        #expect(EnforcementGateFactory.storeMetricsText(MemoryStore()).hasSuffix("attest_gateway_store_ready 1\n"))
    }

    @Test func redisOutageDeniesOrForwardsUnverifiedByRoute() async throws {
        let redis = try RedisServer.start()
        defer { redis.shutDown() }
        let store = try Self.redisStore(redis)
        defer { store.close() }
        let h = try EnforcementHarness(backing: store)
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        #expect(
            await runGate(h.gate, try EnforcementHarness.signed(device, counter: 1, method: "GET", target: "/v1/a")).1
                .forwardedHead != nil
        )

        try redis.stop()
        let started = ContinuousClock.now
        let denied = await runGate(
            h.gate,
            try EnforcementHarness.signed(device, counter: 2, method: "GET", target: "/v1/a")
        ).1
        #expect(denied.status == 503)
        #expect(denied.errorCode == "store_error")
        let allowed = await runGate(
            h.gate,
            try EnforcementHarness.signed(device, counter: 3, method: "GET", target: "/v1/lenient/a")
        ).1
        #expect(allowed.forwardedHead?.headers["X-App-Attest-Status"] == "unverified; reason=store_error")
        // Challenges are stateless: still issued while Redis is down.
        let challenge = await runGate(h.gate, request("POST", "/app-attest/challenge")).1
        #expect(challenge.status == 200)
        // Bounded: the store fails fast or within its command timeout, never hangs.
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect((h.metrics.snapshot.storeErrors.values.reduce(0, +)) >= 2)
    }
}
