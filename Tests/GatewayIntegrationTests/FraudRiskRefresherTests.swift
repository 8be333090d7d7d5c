import Foundation
import GatewayTesting
import Simulator
import Testing
import Verification

@testable import AppleClient
@testable import Enforcement
@testable import GatewayIO
@testable import KeyStore
@testable import OutboundHTTP
@testable import RedisClient

/// `FraudRiskRefresher` against a real redis-server and `scripts/fake-apple.py` over TLS: a
/// simulator-attested key is refreshed with a simulator-minted receipt (risk metric 42), then
/// 404 keeps that receipt and backs off; a second refresher does nothing while the first
/// holds the lease.
@Suite(.serialized, .timeLimit(.minutes(1))) struct FraudRiskRefresherTests {
    @Test func refreshStoresTheVerifiedReceiptAndA404KeepsIt() async throws {
        let authority = try SimulatorAuthority.generate()
        let device = try SimulatedDevice.generate()
        let appID = "ABCDE12345.com.example.app"
        let attestation = try authority.attestation(
            for: device, appID: appID, clientDataHash: [1], environment: .production)
        let attestedReceipt = try AttestationObject(attestation).receipt
        let verifier = try ReceiptVerifier(additionalTrustRootsPEM: [authority.rootCertificatePEM])
        let attested = try verifier.verify(
            receipt: attestedReceipt, appID: appID, publicKey: device.publicKey, at: nil)
        let now = Date()
        var options = ReceiptOptions()
        options.type = .receipt
        options.riskMetric = 42
        options.creationTime = now
        options.notBefore = now.addingTimeInterval(3 * 86_400)
        options.chunkSize = nil
        let minted = try authority.receipt(
            attestedCertificate: attested.attestedCertificate, appID: appID, clientHash: [1],
            environment: .production, options: options)

        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let file = fake.keys.directory + "/refreshed.der"
        try Data(minted).write(to: URL(fileURLWithPath: file))
        try fake.control("/_fake/script", #"[{"status":200,"receipt_file":"\#(file)"},{"status":404}]"#)

        let server = try RedisServer.start()
        defer { server.shutDown() }
        let store = RedisStore(url: try RedisURL(parsing: server.urlString()))
        defer { store.close() }
        let keyID = "a2V5LWlkLWZyYXVkLXJpc2s="
        let record = KeyRecord(
            keyID: keyID, publicKey: device.publicKey, counter: 0, appID: appID, environment: "production",
            receipt: attestedReceipt, attestedAt: now)
        #expect(await store.createKey(record).value == .created)
        let scheduled = await withCheckedContinuation { continuation in
            store.scheduleFraudRisk(keyID: keyID, at: now) { continuation.resume(returning: $0) }
        }
        #expect(throws: Never.self) { try scheduled.get() }

        var configuration = AppleConfiguration(
            teamID: FakeAppleServer.teamID, keyID: FakeAppleServer.keyID, privateKeyFile: fake.keys.p8,
            environment: .production, attestDataOverride: OutboundOrigin(host: "127.0.0.1", port: fake.port),
            caFile: fake.caFile)
        configuration.fraudRisk.requestsPerSecond = 100
        let loop = try EventLoop(index: 0)
        let registry = MetricsRegistry()
        let client = try AppleClientFactory.make(
            configuration, loops: [loop], metrics: OutboundClientMetrics(registry: registry, peer: .apple))
        defer {
            client.shutdown { loop.execute { loop.close() } }
        }
        // The passes run a little after the minting: the simulator's certificates start at the
        // second they were made, and the refresher verifies at the pass's time.
        let passTime = Date().addingTimeInterval(2)
        let refresher = FraudRiskRefresher(
            store: store, client: client, configuration: configuration, verifier: verifier, registry: registry)

        // Another gateway holds the lease: this pass does nothing.
        #expect(
            await withCheckedContinuation { continuation in
                store.claimFraudRiskLease(owner: "other-gateway", ttl: .seconds(30)) {
                    continuation.resume(returning: $0)
                }
            }.value == true)
        let blocked = try await refresher.runOnce(now: passTime, jitter: { 0 }).get()
        #expect(!blocked.heldLease && blocked.outcomes.isEmpty)
        _ = try server.command("DEL", "appattest:fraudrisk:lease")

        let first = try await refresher.runOnce(now: passTime, jitter: { 0 }).get()
        #expect(first.heldLease)
        #expect(first.outcomes == ["refreshed": 1])
        guard case .bulk(let metric) = try server.command("HGET", "appattest:key:{\(keyID)}", "risk_metric") else {
            Issue.record("no risk_metric")
            return
        }
        #expect(String(decoding: metric, as: UTF8.self) == "42")
        #expect(try server.command("HGET", "appattest:key:{\(keyID)}", "receipt") == .bulk(minted))
        // Next attempt at the receipt's not-before, not before: nothing due now.
        guard case .bulk(let score) = try server.command("ZSCORE", "appattest:fraudrisk:due", keyID) else {
            Issue.record("not in the due set")
            return
        }
        #expect(Int(String(decoding: score, as: UTF8.self)) == Int(options.notBefore!.timeIntervalSince1970))
        #expect(try await refresher.runOnce(now: passTime, jitter: { 0 }).get().outcomes.isEmpty)
        #expect(try server.command("GET", "appattest:fraudrisk:lease") == .null, "the lease is given back")

        // Due again later: 404 keeps the receipt and the metric, backs off a day.
        let later = options.notBefore!.addingTimeInterval(60)
        let second = try await refresher.runOnce(now: later, jitter: { 0 }).get()
        #expect(second.outcomes == ["no_data": 1])
        #expect(try server.command("HGET", "appattest:key:{\(keyID)}", "receipt") == .bulk(minted))
        #expect(try server.command("HGET", "appattest:key:{\(keyID)}", "risk_metric") == .bulk(Array("42".utf8)))
        guard case .bulk(let backoff) = try server.command("ZSCORE", "appattest:fraudrisk:due", keyID) else {
            Issue.record("not in the due set")
            return
        }
        #expect(Int(String(decoding: backoff, as: UTF8.self)) == Int(later.timeIntervalSince1970) + 86_400)
        #expect(registry.render().contains(#"attest_gateway_apple_fraud_risk_refreshes_total{outcome="no_data"} 1"#))
        #expect(
            registry.render().contains(#"attest_gateway_apple_requests_total{service="fraud_risk",outcome="404"} 1"#))
    }

    /// Three due keys at 5 calls/s: the pass is spaced (≥ 0.4 s) and each 304 reschedules its key;
    /// then a 401 halts the first key, stops the pass, and leaves the others due.
    @Test func passesAreSpacedAndA401StopsThePass() async throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        try fake.control("/_fake/script", #"[{"status":304}]"#)
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let store = RedisStore(url: try RedisURL(parsing: server.urlString()))
        defer { store.close() }
        let now = Date()
        let keyIDs = ["a2V5LTE=", "a2V5LTI=", "a2V5LTM="]
        for keyID in keyIDs {
            let record = KeyRecord(
                keyID: keyID, publicKey: [4] + [UInt8](repeating: 1, count: 64), counter: 0,
                appID: "ABCDE12345.com.example.app", environment: "production", receipt: [1, 2, 3], attestedAt: now)
            #expect(await store.createKey(record).value == .created)
            _ = await withCheckedContinuation { continuation in
                store.scheduleFraudRisk(keyID: keyID, at: now) { continuation.resume(returning: $0) }
            }
        }
        var configuration = AppleConfiguration(
            teamID: FakeAppleServer.teamID, keyID: FakeAppleServer.keyID, privateKeyFile: fake.keys.p8,
            environment: .production, attestDataOverride: OutboundOrigin(host: "127.0.0.1", port: fake.port),
            caFile: fake.caFile)
        configuration.fraudRisk.requestsPerSecond = 5
        let loop = try EventLoop(index: 0)
        let registry = MetricsRegistry()
        let client = try AppleClientFactory.make(
            configuration, loops: [loop], metrics: OutboundClientMetrics(registry: registry, peer: .apple))
        defer { client.shutdown { loop.execute { loop.close() } } }
        let refresher = FraudRiskRefresher(
            store: store, client: client, configuration: configuration, verifier: try ReceiptVerifier(),
            registry: registry)

        let started = ContinuousClock.now
        let first = try await refresher.runOnce(now: now, jitter: { 0 }).get()
        #expect(ContinuousClock.now - started >= .milliseconds(400))
        #expect(first.outcomes == ["not_modified": 3])
        for keyID in keyIDs {
            guard case .bulk(let score) = try server.command("ZSCORE", "appattest:fraudrisk:due", keyID) else {
                Issue.record("\(keyID) left the due set")
                continue
            }
            #expect(Int(String(decoding: score, as: UTF8.self)) == Int(now.timeIntervalSince1970) + 6 * 3600)
        }

        // Apple refuses the JWT: one call, then the pass stops.
        try fake.control("/_fake/script", #"[{"status":401}]"#)
        let later = now.addingTimeInterval(7 * 3600)
        let second = try await refresher.runOnce(now: later, jitter: { 0 }).get()
        #expect(second.outcomes == ["apple_unauthorized": 1])
        #expect(try server.command("ZCARD", "appattest:fraudrisk:due") == .integer(2), "the halted key left")
        #expect(
            registry.render().contains(#"attest_gateway_apple_requests_total{service="fraud_risk",outcome="401"} 1"#))
    }
}
