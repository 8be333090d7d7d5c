import Foundation
import GatewayTesting
import Simulator
import Synchronization
import Testing
import Verification

@testable import Enforcement
@testable import GateContract
@testable import HTTP1
@testable import KeyStore
@testable import PolicyModel

/// Per-device-key limits (issue 34): the bucket and quota arithmetic the counter script
/// shares, the `key_limits` decoder, and the gate's 429s over the memory store.
@Suite struct KeyLimitsTests {
    static let header = RequestProofPolicyTests.header
    /// 2026-11-29 08:00:00 UTC, in microseconds.
    static let morning: Int64 = 1_795_910_400 * 1_000_000 + 8 * 3_600_000_000

    // MARK: Arithmetic

    @Test func aFullBucketAdmitsTheBurstThenOneTokenPerInterval() {
        let limits = KeyLimits(rate: .init(count: 10, per: .second), burst: 3)
        var ledger = KeyLimitLedger()
        let now = Self.morning
        for _ in 0..<3 { #expect(ledger.charge(limits, nowMicroseconds: now) == nil) }
        let refused = ledger.charge(limits, nowMicroseconds: now)
        #expect(refused == KeyLimitRefusal(limit: .rate, retryAfterSeconds: 1))
        // One interval (100 ms) later exactly one token is back.
        #expect(ledger.charge(limits, nowMicroseconds: now + 100_000) == nil)
        #expect(ledger.charge(limits, nowMicroseconds: now + 100_000)?.limit == .rate)
        // A long pause refills to the burst, never beyond.
        for _ in 0..<3 { #expect(ledger.charge(limits, nowMicroseconds: now + 60_000_000) == nil) }
        #expect(ledger.charge(limits, nowMicroseconds: now + 60_000_000)?.limit == .rate)
    }

    @Test func aRefusalLeavesTheLedgerUnchanged() {
        let limits = KeyLimits(rate: .init(count: 1, per: .minute), burst: 1, dailyQuota: 10)
        var ledger = KeyLimitLedger()
        #expect(ledger.charge(limits, nowMicroseconds: Self.morning) == nil)
        let before = ledger
        let refused = ledger.charge(limits, nowMicroseconds: Self.morning + 1_000_000)
        #expect(refused == KeyLimitRefusal(limit: .rate, retryAfterSeconds: 59))
        #expect(ledger == before, "a refused request spends no quota")
        #expect(ledger.acceptedToday == 1)
    }

    @Test func theQuotaCountsTheUTCDayAndSaysWhenItEnds() {
        let limits = KeyLimits(rate: nil, dailyQuota: 2)
        var ledger = KeyLimitLedger()
        #expect(ledger.charge(limits, nowMicroseconds: Self.morning) == nil)
        #expect(ledger.charge(limits, nowMicroseconds: Self.morning) == nil)
        // 16 hours to midnight UTC.
        #expect(
            ledger.charge(limits, nowMicroseconds: Self.morning)
                == KeyLimitRefusal(limit: .dailyQuota, retryAfterSeconds: 16 * 3600))
        let lastSecond = Self.morning + (16 * 3600 - 1) * 1_000_000
        #expect(ledger.charge(limits, nowMicroseconds: lastSecond)?.retryAfterSeconds == 1)
        let nextDay = Self.morning + 16 * 3_600_000_000
        #expect(ledger.charge(limits, nowMicroseconds: nextDay) == nil, "a new UTC day, a new quota")
        #expect(ledger.acceptedToday == 1)
    }

    @Test func whenBothRefuseTheQuotaIsReported() {
        let limits = KeyLimits(rate: .init(count: 1, per: .hour), burst: 1, dailyQuota: 1)
        var ledger = KeyLimitLedger()
        #expect(ledger.charge(limits, nowMicroseconds: Self.morning) == nil)
        #expect(ledger.charge(limits, nowMicroseconds: Self.morning)?.limit == .dailyQuota)
    }

    @Test func theIntervalRoundsUp() {
        #expect(KeyLimits.Rate(count: 10, per: .second).emissionIntervalMicroseconds == 100_000)
        #expect(KeyLimits.Rate(count: 600, per: .minute).emissionIntervalMicroseconds == 100_000)
        // Rounded up: never more than 3 a second.
        #expect(KeyLimits.Rate(count: 3, per: .second).emissionIntervalMicroseconds == 333_334)
        #expect(KeyLimits.Rate(count: 2_000_000, per: .second).emissionIntervalMicroseconds == 1)
    }

    // MARK: Decoder

    @Test func keyLimitsAreDecoded() throws {
        let policy = try PolicyLoader.parse(
            Self.header + """
                routes:
                  - name: both
                    match: { path_prefix: /a }
                    upstream: api
                    key_limits: { rate: 600/min, burst: 20, daily_quota: 5000 }
                  - name: rate
                    match: { path_prefix: /b }
                    upstream: api
                    key_limits: { rate: 10/s }
                  - name: quota
                    match: { path_prefix: /c }
                    upstream: api
                    key_limits: { daily_quota: 7 }
                  - name: none
                    match: { path_prefix: /d }
                    upstream: api
                """, sourcePath: "p.yaml")
        #expect(
            policy.routes[0].keyLimits == KeyLimits(rate: .init(count: 600, per: .minute), burst: 20, dailyQuota: 5000))
        #expect(policy.routes[1].keyLimits?.burst == 10, "burst defaults to one period's worth")
        #expect(policy.routes[2].keyLimits == KeyLimits(rate: nil, dailyQuota: 7))
        #expect(policy.routes[3].keyLimits == nil)
        #expect(PolicySummary.describe(policy.routes[0]).contains("key_rate=600/min burst=20 key_daily_quota=5000"))
    }

    @Test(arguments: [
        ("{ rate: 10/day }", PolicyError.Code.invalidValue, "routes[0].key_limits.rate"),
        ("{ rate: 0/s }", .invalidValue, "routes[0].key_limits.rate"),
        ("{ rate: -1/s }", .invalidValue, "routes[0].key_limits.rate"),
        ("{ rate: 10 }", .wrongType, "routes[0].key_limits.rate"),
        ("{ rate: \"10/s/s\" }", .invalidValue, "routes[0].key_limits.rate"),
        ("{ burst: 5 }", .invalidValue, "routes[0].key_limits.burst"),
        ("{ rate: 1/s, burst: 0 }", .outOfRange, "routes[0].key_limits.burst"),
        ("{ daily_quota: 0 }", .outOfRange, "routes[0].key_limits.daily_quota"),
        ("{ daily_quota: many }", .wrongType, "routes[0].key_limits.daily_quota"),
        ("{ per_key: 1 }", .unknownKey, "routes[0].key_limits.per_key"),
        ("{}", .missingKey, "routes[0].key_limits.rate"),
        ("10/s", .wrongType, "routes[0].key_limits"),
    ])
    func badKeyLimitsNameTheField(setting: String, code: PolicyError.Code, field: String) {
        let error = RiskMetricPolicyTests.routeError("key_limits: \(setting)")
        #expect(error?.code == code, "\(String(describing: error))")
        #expect(error?.field == field, "\(String(describing: error))")
        #expect((error?.line ?? 0) >= 8, "\(String(describing: error))")
    }

    @Test func limitsThatCannotApplyAreWarnedAbout() throws {
        var warnings: [PolicyWarning] = []
        _ = try PolicyLoader.parse(
            Self.header + """
                routes:
                  - name: off
                    match: { path_prefix: /a }
                    upstream: api
                    mode: off
                    key_limits: { rate: 1/s }
                  - name: debug
                    match: { path_prefix: /b }
                    upstream: api
                    allow_debug_tokens: true
                    key_limits: { rate: 1/s }
                """, sourcePath: "p.yaml", warnings: &warnings)
        #expect(warnings.contains { $0.code == "setting_without_effect" && $0.field == "routes[0].key_limits" })
        #expect(warnings.contains { $0.code == "key_limits_partial" && $0.field == "routes[1].key_limits" })
    }

    // MARK: The gate, over the memory store

    static let routes = """
          - name: limited
            match: { path_prefix: /v1/ }
            upstream: api
            key_limits: { rate: 1/min, burst: 2 }
          - name: quota
            match: { path_prefix: /q/ }
            upstream: api
            key_limits: { daily_quota: 1 }
        """

    @Test func aDeviceOverItsRateGets429WhileAnotherPasses() async throws {
        let clock = LimitClock(Self.morning)
        let store = MemoryStore(limitClock: clock.now)
        let h = try ProofHarness(routes: Self.routes, store: store)
        let busy = try SimulatedDevice.generate()
        let quiet = try SimulatedDevice.generate()
        #expect(try await h.attest(busy).status == 201)
        #expect(try await h.attest(quiet).status == 201)

        #expect(try await h.send(busy, counter: 1, target: "/v1/a").forwardedHead != nil)
        #expect(try await h.send(busy, counter: 2, target: "/v1/a").forwardedHead != nil)
        let refused = try await h.send(busy, counter: 3, target: "/v1/a")
        #expect(refused.status == 429)
        #expect(refused.errorCode == "key_rate_limited")
        #expect(refused.localResponse?.headers["Retry-After"] == "60")
        #expect(h.metrics.snapshot.keyLimitRefusals["limited|rate"] == 1)
        #expect(h.metrics.snapshot.requests["limited|rate_limited"] == 1)

        // Same route, same address, another key: its own bucket.
        #expect(try await h.send(quiet, counter: 1, target: "/v1/a").forwardedHead != nil)

        // The refused request did not advance the counter: once a token is back, the same
        // counter is accepted once, and then it is a replay.
        clock.advance(60_000_000)
        #expect(try await h.send(busy, counter: 3, target: "/v1/a").forwardedHead != nil)
        clock.advance(60_000_000)
        #expect(try await h.send(busy, counter: 3, target: "/v1/a").errorCode == "counter_replay")
    }

    @Test func aReplayIsRefusedAsAReplayAndSpendsNoToken() async throws {
        let clock = LimitClock(Self.morning)
        let store = MemoryStore(limitClock: clock.now)
        let h = try ProofHarness(routes: Self.routes, store: store)
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        #expect(try await h.send(device, counter: 1, target: "/v1/a").forwardedHead != nil)
        for _ in 0..<5 {
            #expect(try await h.send(device, counter: 1, target: "/v1/a").errorCode == "counter_replay")
        }
        #expect(try await h.send(device, counter: 2, target: "/v1/a").forwardedHead != nil, "the burst's second token")
    }

    @Test func theDailyQuotaRefusesUntilMidnightUTC() async throws {
        let clock = LimitClock(Self.morning)
        let store = MemoryStore(limitClock: clock.now)
        let h = try ProofHarness(routes: Self.routes, store: store)
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        #expect(try await h.send(device, counter: 1, target: "/q/a").forwardedHead != nil)
        let refused = try await h.send(device, counter: 2, target: "/q/a")
        #expect(refused.status == 429)
        #expect(refused.errorCode == "key_daily_quota_exceeded")
        #expect(refused.localResponse?.headers["Retry-After"] == String(16 * 3600))
        #expect(h.metrics.snapshot.keyLimitRefusals["quota|daily_quota"] == 1)
        // Routes keep their own ledgers: the rate-limited route still passes.
        #expect(try await h.send(device, counter: 2, target: "/v1/a").forwardedHead != nil)
        clock.advance(16 * 3_600_000_000)
        #expect(try await h.send(device, counter: 3, target: "/q/a").forwardedHead != nil)
    }

    @Test func everyDoorAnswersTheLimitWithRetryAfter() async throws {
        let clock = LimitClock(Self.morning)
        let h = try ProofHarness(routes: Self.routes, store: MemoryStore(limitClock: clock.now))
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        #expect(try await h.send(device, counter: 1, target: "/v1/a").forwardedHead != nil)
        #expect(try await h.send(device, counter: 2, target: "/v1/a").forwardedHead != nil)
        let authz = AuthzGate(inner: h.gate, pathPrefix: "/ext_authz")

        // Forward auth (nginx, Caddy, Traefik).
        let signed = try EnforcementHarness.signed(device, counter: 3, method: "GET", target: "/v1/a")
        let (_, forwardAuth, _) = await runGate(authz, AuthzGateTests.forwardAuth(signed))
        #expect(forwardAuth.status == 429)
        #expect(forwardAuth.errorCode == "key_rate_limited")
        #expect(forwardAuth.localResponse?.headers["X-App-Attest-Error"] == "key_rate_limited")
        #expect(forwardAuth.localResponse?.headers["Retry-After"] == "60")

        // Envoy ext_authz: the original target under the path prefix.
        var envoy = signed
        envoy.target = "/ext_authz/v1/a"
        let (_, envoyAnswer, _) = await runGate(authz, envoy)
        #expect(envoyAnswer.status == 429)
        #expect(envoyAnswer.errorCode == "key_rate_limited")
        #expect(envoyAnswer.localResponse?.headers["Retry-After"] == "60")
        #expect(h.metrics.snapshot.keyLimitRefusals["limited|rate"] == 2)
    }

    @Test func theCodesAreRefusalsOfTheirOwn() {
        let rate = EnforcementError.keyLimited(
            KeyLimitRefusal(limit: .rate, retryAfterSeconds: 3),
            route: RoutePolicy(name: "r", match: .init(), upstream: "api"))
        #expect(rate.status == 429 && rate.code == .keyRateLimited)
        #expect(rate.response.headers["Retry-After"] == "3")
        let quota = EnforcementError.keyLimited(
            KeyLimitRefusal(limit: .dailyQuota, retryAfterSeconds: 7),
            route: RoutePolicy(name: "r", match: .init(), upstream: "api"))
        #expect(quota.status == 429 && quota.code == .keyDailyQuotaExceeded)
        #expect(quota.response.headers["Retry-After"] == "7")
    }
}

/// Unix microseconds for the memory store's limits, moved by hand.
private final class LimitClock: Sendable {
    private let value: Mutex<Int64>
    init(_ start: Int64) { self.value = Mutex(start) }
    @Sendable func now() -> Int64 { self.value.withLock { $0 } }
    func advance(_ microseconds: Int64) { self.value.withLock { $0 += microseconds } }
}
