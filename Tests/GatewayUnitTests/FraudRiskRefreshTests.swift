import Foundation
import GatewayTesting
import Testing
import Verification

@testable import AppleClient

@Suite struct FraudRiskRefreshTests {
    static let t0 = Date(timeIntervalSince1970: 1_764_000_000)
    static let day: TimeInterval = 86_400

    static func payload(metric: Int?, created: Date, notBefore: Date?) -> Receipt {
        Receipt(
            appID: "ABCDE12345.com.example.app", attestedCertificate: [1], clientHash: [2], token: "t",
            type: .receipt, environment: "production", creationTime: created, riskMetric: metric,
            notBefore: notBefore, expirationTime: created.addingTimeInterval(90 * Self.day))
    }

    @Test func aNewKeyIsDueAtOnceAndAfterItsNotBefore() {
        let fresh = FraudRiskRefresh(attestedAt: Self.t0)
        #expect(fresh.isDue(at: Self.t0) && fresh.status == .scheduled && fresh.riskMetric == nil)
        let later = FraudRiskRefresh(
            attestedAt: Self.t0, receipt: Self.payload(metric: nil, created: Self.t0, notBefore: Self.t0 + 3600))
        #expect(!later.isDue(at: Self.t0) && later.isDue(at: Self.t0 + 3600))
    }

    @Test func aVerifiedReceiptIsStoredAndTheNextRefreshIsADayLater() {
        var state = FraudRiskRefresh(attestedAt: Self.t0)
        let payload = Self.payload(metric: 3, created: Self.t0, notBefore: Self.t0 + 3600)
        let action = state.handle(.refreshed(receipt: [9, 9], payload: payload), at: Self.t0, jitter: 0)
        #expect(action == .storeReceipt([9, 9], nextAttempt: Self.t0 + Self.day))
        #expect(state.riskMetric == 3 && state.riskMetricTime == Self.t0 && state.lastOutcome == "refreshed")
        #expect(!state.isDue(at: Self.t0 + Self.day - 1) && state.isDue(at: Self.t0 + Self.day))
        // Jitter only spreads later (up to 10% of the interval), never earlier than a day.
        var jittered = FraudRiskRefresh(attestedAt: Self.t0)
        _ = jittered.handle(.refreshed(receipt: [1], payload: payload), at: Self.t0, jitter: 0.999)
        let next = jittered.nextAttempt!.timeIntervalSince(Self.t0)
        #expect(next >= Self.day && next < Self.day * 1.1)
        // A not-before beyond the interval wins.
        var far = FraudRiskRefresh(attestedAt: Self.t0)
        let farPayload = Self.payload(metric: 1, created: Self.t0, notBefore: Self.t0 + 3 * Self.day)
        _ = far.handle(.refreshed(receipt: [1], payload: farPayload), at: Self.t0, jitter: 0)
        #expect(far.nextAttempt == Self.t0 + 3 * Self.day)
    }

    @Test func notModifiedBacksOffDoublingUpToTheInterval() {
        var state = FraudRiskRefresh(attestedAt: Self.t0)
        var delays: [TimeInterval] = []
        var now = Self.t0
        for _ in 0..<5 {
            guard case .retry(let at) = state.handle(.notModified, at: now, jitter: 0) else {
                Issue.record("304 must retry")
                return
            }
            delays.append(at.timeIntervalSince(now))
            now = at
        }
        let expected: [TimeInterval] = [6 * 3600, 12 * 3600, Self.day, Self.day, Self.day]
        #expect(delays == expected)
        #expect(state.lastOutcome == "not_modified" && state.failures == 0)
    }

    @Test func noDataKeepsTheMetricAndBacksOffWithoutGivingUp() {
        var state = FraudRiskRefresh(attestedAt: Self.t0)
        _ = state.handle(
            .refreshed(receipt: [1], payload: Self.payload(metric: 7, created: Self.t0, notBefore: nil)), at: Self.t0,
            jitter: 0)
        var now = Self.t0 + Self.day
        var delays: [TimeInterval] = []
        for _ in 0..<30 {
            guard case .retry(let at) = state.handle(.noData, at: now, jitter: 0) else {
                Issue.record("404 must retry, never halt")
                return
            }
            delays.append(at.timeIntervalSince(now) / Self.day)
            now = at
        }
        let expected: [TimeInterval] = [1, 2, 4, 7, 7]
        #expect(Array(delays.prefix(5)) == expected)
        #expect(delays.allSatisfy { $0 <= 7 })
        #expect(state.riskMetric == 7 && state.lastOutcome == "no_data" && state.status == .backingOff)
        // The receipt "comes back to life": back to a daily schedule.
        let action = state.handle(
            .refreshed(receipt: [2], payload: Self.payload(metric: 8, created: now, notBefore: nil)), at: now,
            jitter: 0)
        #expect(action == .storeReceipt([2], nextAttempt: now + Self.day))
        #expect(state.failures == 0 && state.status == .scheduled && state.riskMetric == 8)
    }

    @Test func transientFailuresBackOffExponentiallyWithJitterAndRetryAfter() {
        var state = FraudRiskRefresh(attestedAt: Self.t0)
        var now = Self.t0
        var previous: TimeInterval = 0
        for attempt in 1...12 {
            let error = AppleError(attempt % 2 == 0 ? .serverError : .unreachable, "")
            guard case .retry(let at) = state.handle(.failed(error, retryAfter: nil), at: now, jitter: 1) else {
                Issue.record("transient errors retry")
                return
            }
            let delay = at.timeIntervalSince(now)
            let nominal = min(60 * pow(2, Double(attempt - 1)), 6 * 3600)
            #expect(delay >= nominal / 2 && delay <= nominal, "attempt \(attempt): \(delay)")
            #expect(delay >= previous)
            previous = delay
            now = at
        }
        // Retry-After is a floor, jitter 0 gives half the nominal delay.
        var throttled = FraudRiskRefresh(attestedAt: Self.t0)
        let action = throttled.handle(
            .failed(AppleError(.throttled, status: 429, ""), retryAfter: .seconds(600)), at: Self.t0, jitter: 0)
        #expect(action == .retry(at: Self.t0 + 600))
        #expect(throttled.lastOutcome == "apple_throttled")
        var quick = FraudRiskRefresh(attestedAt: Self.t0)
        #expect(
            quick.handle(.failed(AppleError(.throttled, ""), retryAfter: nil), at: Self.t0, jitter: 0)
                == .retry(at: Self.t0 + 30))
    }

    @Test func badRequestsAndRejectedReceiptsBackOffLikeNoData() {
        var state = FraudRiskRefresh(attestedAt: Self.t0)
        #expect(
            state.handle(.failed(AppleError(.badRequest, status: 400, ""), retryAfter: nil), at: Self.t0, jitter: 0)
                == .retry(at: Self.t0 + Self.day))
        let rejected = VerificationError(.receiptChainInvalid, "")
        #expect(state.handle(.receiptRejected(rejected), at: Self.t0, jitter: 0) == .retry(at: Self.t0 + 2 * Self.day))
        #expect(state.lastOutcome == "receipt_chain_invalid")
    }

    @Test func unauthorizedHaltsUntilResumed() {
        var state = FraudRiskRefresh(attestedAt: Self.t0)
        let error = AppleError(.unauthorized, status: 401, "bad JWT")
        #expect(state.handle(.failed(error, retryAfter: nil), at: Self.t0, jitter: 0.5) == .halt(error))
        #expect(state.status == .halted && state.nextAttempt == nil && !state.isDue(at: Self.t0 + 365 * Self.day))
        state.resume(at: Self.t0 + 10)
        #expect(state.status == .scheduled && state.isDue(at: Self.t0 + 10))
    }

    @Test func theStateRoundTripsThroughJSON() throws {
        var state = FraudRiskRefresh(attestedAt: Self.t0)
        _ = state.handle(
            .refreshed(receipt: [1], payload: Self.payload(metric: 2, created: Self.t0, notBefore: nil)), at: Self.t0,
            jitter: 0.3)
        _ = state.handle(.noData, at: Self.t0 + Self.day, jitter: 0.3)
        let data = try JSONEncoder().encode(state)
        #expect(try JSONDecoder().decode(FraudRiskRefresh.self, from: data) == state)
    }

    /// A real refreshed receipt (Apple-signed, from the shared vectors) through the whole
    /// path: the 200's base64 body decoded, verified with the key's public key and App ID,
    /// its metric and not-before extracted and stored.
    @Test func aRealRefreshedReceiptFlowsFromAnswerToState() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let data = try Data(contentsOf: root.appendingPathComponent("Tests/VerificationTests/Fixtures/receipts.json"))
        let vectors = try #require(
            (try JSONSerialization.jsonObject(with: data) as? [String: Any])?["vectors"] as? [[String: Any]])
        let vector = try #require(vectors.first { $0["id"] as? String == "rcpt-02" })
        let receiptBase64 = try #require(vector["receipt"] as? String)
        let answer = try FraudRiskAnswer.decode(status: 200, body: Array(receiptBase64.utf8))
        guard case .receipt(let receipt) = answer else {
            Issue.record("expected a receipt")
            return
        }
        let publicKey = try ECPublicKey(pem: try #require(vector["public_key"] as? String))
        let payload = try ReceiptVerifier().verify(
            receipt: receipt, appID: vector["app_id"] as? String, publicKey: publicKey.x962, at: nil)
        #expect(payload.type == .receipt)
        let metric = try #require(payload.riskMetric)
        var state = FraudRiskRefresh(attestedAt: payload.creationTime)
        let now = payload.creationTime
        guard
            case .storeReceipt(let stored, let next) = state.handle(
                .refreshed(receipt: receipt, payload: payload), at: now, jitter: 0)
        else {
            Issue.record("expected the receipt stored")
            return
        }
        #expect(stored == receipt && state.riskMetric == metric)
        #expect(next >= now + Self.day && next >= (payload.notBefore ?? now))
        #expect(AppleEnvironment(receiptEnvironment: payload.environment) != nil)
    }
}
