import Foundation
import GatewayTesting
import Simulator
import Synchronization
import Testing
import Verification

@testable import AppleClient
@testable import Enforcement
@testable import GatewayIO
@testable import HTTP1
@testable import KeyStore
@testable import OutboundHTTP
@testable import PolicyModel
@testable import RedisClient

extension FakeAppleServer {
    /// One request the fake saw (`GET /_fake/log`).
    struct LoggedRequest: Decodable {
        var path: String
        var jwt: String
        var time: Double
        var body_sha256: String
    }

    /// The whole log, in pages that fit the client's answer bound.
    func requestLog() throws -> [LoggedRequest] {
        var all: [LoggedRequest] = []
        while true {
            let head =
                "GET /_fake/log?offset=\(all.count)&limit=400 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n"
            guard let response = try self.exchange(Array(head.utf8)), response.status == 200 else {
                throw TestFailure("GET /_fake/log failed")
            }
            let page = try JSONDecoder().decode([LoggedRequest].self, from: Data(response.body))
            all += page
            if page.count < 400 { return all }
        }
    }
}

/// Fraud risk through the gate (issue 13) over a real redis-server and `scripts/fake-apple.py`:
/// the attestation's receipt verified and the key scheduled at attest time; the metric read
/// with the counter and sent upstream; `max_risk_metric` with flag and deny; the lazy refresh;
/// and many due keys across two refreshers, each refreshed once under the rate limit.
@Suite(.serialized, .timeLimit(.minutes(2))) struct FraudRiskGateTests {
    static let appID = EnforcementHarness.appID

    static func policy(fake: FakeAppleServer) -> GatewayPolicy {
        var policy = EnforcementHarness.policy()
        var flagged = RoutePolicy(
            name: "flagged", match: .init(pathPrefix: "/v1/flagged"), upstream: "api", mode: .enforce)
        flagged.riskMetric = RiskMetricRule(maximum: 10)
        var denied = RoutePolicy(
            name: "denied", match: .init(pathPrefix: "/v1/denied"), upstream: "api", mode: .enforce)
        denied.riskMetric = RiskMetricRule(maximum: 10, action: .deny)
        var lenient = RoutePolicy(name: "roomy", match: .init(pathPrefix: "/v1/roomy"), upstream: "api", mode: .enforce)
        lenient.riskMetric = RiskMetricRule(maximum: 100, action: .deny)
        policy.routes = [flagged, denied, lenient] + policy.routes
        var apple = AppleConfiguration(
            teamID: FakeAppleServer.teamID, keyID: FakeAppleServer.keyID, privateKeyFile: fake.keys.p8,
            environment: .production, attestDataOverride: OutboundOrigin(host: "127.0.0.1", port: fake.port),
            caFile: fake.caFile)
        apple.fraudRisk.isEnabled = true
        apple.fraudRisk.requestsPerSecond = 100
        policy.apple = apple
        return policy
    }

    static func text(_ reply: RESPValue) -> String? {
        if case .bulk(let bytes) = reply { return String(decoding: bytes, as: UTF8.self) }
        return nil
    }

    @Test func attestRefreshThenTheUpstreamSeesTheMetricAndTheRouteRuleApplies() async throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let redis = try RedisServer.start()
        defer { redis.shutDown() }
        let store = RedisStore(url: try RedisURL(parsing: redis.urlString()))
        defer { store.close() }
        let policy = Self.policy(fake: fake)
        let authority = EnforcementHarness.authority
        let gate = try AttestGate(
            policy: policy, store: store, trustRootsPEM: [authority.rootCertificatePEM])
        let harness = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        let keyID = Data(device.keyID).base64EncodedString()
        let record = "appattest:key:{\(keyID)}"

        // Attest: challenge and attestation through this gate.
        let challenge = try #require(
            await runGate(gate, request("POST", "/app-attest/challenge")).1.json?["challenge"] as? String)
        let attested = await runGate(
            gate, request("POST", "/app-attest/attest"), body: try harness.attestBody(device, challenge: challenge)
        ).1
        #expect(attested.status == 201)
        // The attest-time state is saved (its receipt verified: no metric in an attestation
        // receipt) and the key is due at once.
        #expect(try eventually { Self.text(try redis.command("HGET", record, "fraud_risk")) != nil })
        let state = try JSONDecoder().decode(
            FraudRiskRefresh.self,
            from: Data(try #require(Self.text(try redis.command("HGET", record, "fraud_risk"))).utf8))
        #expect(state.receiptExpiration != nil, "the attestation's receipt was verified and its fields recorded")
        #expect(state.riskMetric == nil)
        // The due entry is a second command after the state (HSET, then ZADD): wait for it too,
        // or a loaded machine sees the state without it.
        #expect(try eventually { Self.text(try redis.command("ZSCORE", "appattest:fraudrisk:due", keyID)) != nil })

        // Before any refresh: the metric is unknown, no header, and even `deny` passes.
        let unknown = await runGate(
            gate,
            try EnforcementHarness.signed(
                device, counter: 1, method: "GET", target: "/v1/denied/a",
                extraHeaders: [("X-App-Attest-Risk-Metric", "0"), ("X-App-Attest-Risk-Exceeded", "0")])
        ).1
        let unknownHead = try #require(unknown.forwardedHead)
        #expect(unknownHead.headers["X-App-Attest-Status"] == "verified")
        #expect(unknownHead.headers["X-App-Attest-Risk-Metric"] == nil, "the client's copy is stripped")
        #expect(unknownHead.headers["X-App-Attest-Risk-Exceeded"] == nil)

        // The refresher gets a receipt with metric 42 from Apple (the fake).
        let attestedReceipt = try AttestationObject(
            try authority.attestation(for: device, appID: Self.appID, clientDataHash: [1], environment: .production)
        ).receipt
        let verifier = try ReceiptVerifier(additionalTrustRootsPEM: [authority.rootCertificatePEM])
        let payload = try verifier.verify(
            receipt: attestedReceipt, appID: Self.appID, publicKey: device.publicKey, at: nil)
        var options = ReceiptOptions()
        options.type = .receipt
        options.riskMetric = 42
        options.creationTime = Date().addingTimeInterval(-30)
        options.notBefore = Date().addingTimeInterval(86_400)
        options.chunkSize = nil
        let minted = try authority.receipt(
            attestedCertificate: payload.attestedCertificate, appID: Self.appID, clientHash: [1],
            environment: .production, options: options)
        let file = fake.keys.directory + "/refreshed.der"
        try Data(minted).write(to: URL(fileURLWithPath: file))
        try fake.control("/_fake/script", #"[{"status":200,"receipt_file":"\#(file)"}]"#)
        let loop = try EventLoop(index: 0)
        let registry = MetricsRegistry()
        let apple = try #require(policy.apple)
        let client = try AppleClientFactory.make(
            apple, loops: [loop], metrics: OutboundClientMetrics(registry: registry, peer: .apple))
        defer { client.shutdown { loop.execute { loop.close() } } }
        let refresher = FraudRiskRefresher(
            store: store, client: client, configuration: apple, verifier: verifier, registry: registry)
        let pass = try await refresher.runOnce(now: Date().addingTimeInterval(2), jitter: { 0 }).get()
        #expect(pass.outcomes == ["refreshed": 1])

        // The upstream sees the metric and its age; the flag route marks it, deny refuses.
        let flagged = try #require(
            await runGate(
                gate, try EnforcementHarness.signed(device, counter: 2, method: "GET", target: "/v1/flagged/a")
            )
            .1.forwardedHead)
        #expect(flagged.headers["X-App-Attest-Risk-Metric"] == "42")
        let age = try #require(flagged.headers["X-App-Attest-Risk-Metric-Age"].flatMap { Int($0) })
        #expect((29...120).contains(age))
        #expect(flagged.headers["X-App-Attest-Risk-Exceeded"] == "10")
        let roomy = try #require(
            await runGate(gate, try EnforcementHarness.signed(device, counter: 3, method: "GET", target: "/v1/roomy/a"))
                .1.forwardedHead)
        #expect(roomy.headers["X-App-Attest-Risk-Metric"] == "42")
        #expect(roomy.headers["X-App-Attest-Risk-Exceeded"] == nil)
        let denied = await runGate(
            gate, try EnforcementHarness.signed(device, counter: 4, method: "GET", target: "/v1/denied/a")
        ).1
        #expect(denied.status == 403)
        #expect(denied.errorCode == "risk_metric_exceeded")

        // Apple down: a refresh pass fails (the key backs off, its metric kept) and the request
        // path is unchanged (it never calls Apple).
        try fake.control("/_fake/mode", #"{"down":true}"#)
        _ = try redis.command("ZADD", "appattest:fraudrisk:due", "1", keyID)
        let failed = try await refresher.runOnce(now: Date().addingTimeInterval(2), jitter: { 0 }).get()
        #expect(failed.outcomes == ["apple_unreachable": 1])
        let during = try #require(
            await runGate(gate, try EnforcementHarness.signed(device, counter: 5, method: "GET", target: "/v1/roomy/b"))
                .1.forwardedHead)
        #expect(during.headers["X-App-Attest-Status"] == "verified")
        #expect(during.headers["X-App-Attest-Risk-Metric"] == "42")
        let deniedDuring = await runGate(
            gate, try EnforcementHarness.signed(device, counter: 6, method: "GET", target: "/v1/denied/b")
        ).1
        #expect(deniedDuring.errorCode == "risk_metric_exceeded")
        try fake.control("/_fake/mode", #"{"down":false}"#)

        // Lazy refresh: the key left the due set (a crash, a halt); its next use brings it back, now.
        _ = try redis.command("ZREM", "appattest:fraudrisk:due", keyID)
        _ = try redis.command("HSET", record, "risk_next", "1")
        let used = Date()
        #expect(
            await runGate(
                gate, try EnforcementHarness.signed(device, counter: 7, method: "GET", target: "/v1/flagged/b")
            )
            .1.forwardedHead != nil)
        #expect(try eventually { Self.text(try redis.command("ZSCORE", "appattest:fraudrisk:due", keyID)) != nil })
        let score = try #require(
            Self.text(try redis.command("ZSCORE", "appattest:fraudrisk:due", keyID)).flatMap(Double.init))
        #expect(abs(score - used.timeIntervalSince1970) < 5)
        // ... once per quiet period: the next request does not wake it again.
        let quiet = try #require(Self.text(try redis.command("HGET", record, "risk_next")).flatMap(Int.init))
        #expect(quiet >= Int(used.timeIntervalSince1970) + RedisStore.lazyRefreshQuietSeconds - 2)
    }

    /// Only an accepted counter moves a key's `risk_next` (the lazy refresh's quiet period).
    /// Before, the counter script moved it before its revoked and replay checks, so a replay
    /// that reached the script (inside a `counter_window`, or on an instance whose key cache is
    /// cold) pushed the refresh a period on, and a replay every period kept the key's metric
    /// from ever being refreshed.
    @Test func onlyAnAcceptedCounterMovesTheLazyRefresh() async throws {
        let redis = try RedisServer.start()
        defer { redis.shutDown() }
        let store = RedisStore(url: try RedisURL(parsing: redis.urlString()))
        defer { store.close() }
        let keyID = randomToken("key-")
        let record = "appattest:key:{\(keyID)}"
        let advance = { (counter: UInt32, window: Int) async -> Result<CounterAdvanceReading, StoreError> in
            await withCheckedContinuation { continuation in
                store.advanceCounterReadingRisk(keyID: keyID, to: counter, window: window, lazyRefreshAt: Date()) {
                    continuation.resume(returning: $0)
                }
            }
        }
        _ = try redis.command("HSET", record, "counter", "7", "risk_next", "1")

        // Strict: not increasing.
        #expect(try await advance(7, 0).get().advance == .notIncreasing(stored: 7))
        #expect(Self.text(try redis.command("HGET", record, "risk_next")) == "1")
        // Window: below the window, then a position already seen.
        #expect(try await advance(2, 4).get().advance == .notIncreasing(stored: 7))
        #expect(try await advance(7, 4).get().advance == .notIncreasing(stored: 7))
        #expect(Self.text(try redis.command("HGET", record, "risk_next")) == "1")
        // Revoked.
        _ = try redis.command("HSET", record, "status", "revoked")
        #expect(try await advance(8, 0).get().advance == .revoked)
        #expect(Self.text(try redis.command("HGET", record, "risk_next")) == "1")
        _ = try redis.command("HDEL", record, "status")

        // Accepted: due, and the quiet period starts.
        let accepted = try await advance(8, 0).get()
        #expect(accepted.advance == .advanced)
        #expect(accepted.risk.refreshDue)
        let next = try #require(Self.text(try redis.command("HGET", record, "risk_next")).flatMap(Int.init))
        #expect(next >= Int(Date().timeIntervalSince1970) + RedisStore.lazyRefreshQuietSeconds - 2)
        #expect(try await advance(9, 0).get().risk.refreshDue == false)
    }

    /// Many due keys, two refreshers (two gateways) sharing Redis and the fake: every key is
    /// asked for once, and the calls stay under `requests_per_second` (the fake's log times).
    /// 400 keys at 40 calls/s (about 10 s), so that the limit binds: on this 2-core machine a
    /// serial pass reaches about 95 refreshes/s (2,000 keys took 21 s at a 400/s limit), so
    /// 10,000 keys would take close to two minutes.
    @Test func manyDueKeysAcrossTwoRefreshersAreEachRefreshedOnceUnderTheRateLimit() async throws {
        let keyCount = 400
        let rate = 40
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        try fake.control("/_fake/script", #"[{"status":304}]"#)
        let redis = try RedisServer.start()
        defer { redis.shutDown() }
        let stores = [
            RedisStore(url: try RedisURL(parsing: redis.urlString())),
            RedisStore(url: try RedisURL(parsing: redis.urlString())),
        ]
        defer { for store in stores { store.close() } }
        let now = Date()
        let expected = Set(
            (0..<keyCount).map { index in
                SHA256.hash(Array(Data(Array("receipt-\(index)".utf8)).base64EncodedString().utf8)).hexString
            })
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<keyCount {
                let receipt = Array("receipt-\(index)".utf8)
                let keyID = Data(Array("key-\(index)".utf8)).base64EncodedString()
                let record = KeyRecord(
                    keyID: keyID, publicKey: [4] + [UInt8](repeating: 1, count: 64), counter: 0,
                    appID: Self.appID, environment: "production", receipt: receipt, attestedAt: now)
                let store = stores[0]
                group.addTask {
                    _ = await store.createKey(record).value
                    _ = await withCheckedContinuation { continuation in
                        store.scheduleFraudRisk(keyID: keyID, at: now) { continuation.resume(returning: $0) }
                    }
                }
            }
        }
        #expect(try redis.command("ZCARD", "appattest:fraudrisk:due") == .integer(Int64(keyCount)))

        var configuration = AppleConfiguration(
            teamID: FakeAppleServer.teamID, keyID: FakeAppleServer.keyID, privateKeyFile: fake.keys.p8,
            environment: .production, attestDataOverride: OutboundOrigin(host: "127.0.0.1", port: fake.port),
            caFile: fake.caFile)
        configuration.fraudRisk.requestsPerSecond = rate
        configuration.fraudRisk.sweepInterval = .milliseconds(100)
        let loops = [try EventLoop(index: 0), try EventLoop(index: 1)]
        let registry = MetricsRegistry()
        var clients: [OutboundHTTPClient] = []
        var sweepers: [FraudRiskSweeper] = []
        for index in 0..<2 {
            let client = try AppleClientFactory.make(
                configuration, loops: [loops[index]], metrics: OutboundClientMetrics(registry: registry, peer: .apple))
            clients.append(client)
            let refresher = FraudRiskRefresher(
                store: stores[index], client: client, configuration: configuration, verifier: try ReceiptVerifier(),
                registry: registry, owner: "gateway-\(index)")
            sweepers.append(FraudRiskSweeper(refresher: refresher, interval: configuration.fraudRisk.sweepInterval))
        }
        defer {
            for (index, client) in clients.enumerated() {
                let loop = loops[index]
                client.shutdown { loop.execute { loop.close() } }
            }
        }
        print("fraud-risk sweep: \(keyCount) keys created and due")
        let started = ContinuousClock.now
        for sweeper in sweepers { sweeper.start() }
        #expect(
            try eventually(timeout: .seconds(60)) {
                // Every key answered 304: rescheduled 6 h on, none due now.
                guard
                    case .integer(let due) = try redis.command(
                        "ZCOUNT", "appattest:fraudrisk:due", "-inf", String(Int(now.timeIntervalSince1970) + 60))
                else { return false }
                return due == 0
            })
        for sweeper in sweepers { sweeper.stop() }
        let elapsed = ContinuousClock.now - started
        let log = try fake.requestLog().filter { $0.path == "/v1/attestationData" }
        #expect(log.count == keyCount, "each key once: \(log.count) calls for \(keyCount) keys")
        #expect(Set(log.map(\.body_sha256)) == expected)
        #expect(log.allSatisfy { $0.jwt == "valid" })
        // Rate: in every one-second window of the fake's log, at most rate + burst calls.
        let times = log.map(\.time).sorted()
        var start = 0
        var busiest = 0
        for end in times.indices {
            while times[end] - times[start] >= 1 { start += 1 }
            busiest = max(busiest, end - start + 1)
        }
        let burst = OutboundTokenBucket(ratePerSecond: rate).burst
        #expect(busiest <= rate + burst, "busiest second: \(busiest) calls, limit \(rate)")
        print("fraud-risk sweep: \(keyCount) keys in \(elapsed), busiest second \(busiest) calls (limit \(rate))")
    }

}
