import GatewayTesting
import Testing

@testable import AppleClient
@testable import OutboundHTTP

/// The outbound client's breaker and token bucket, as values: no socket, no clock.
@Suite struct OutboundCircuitBreakerTests {
    static let second: UInt64 = 1_000_000_000

    @Test func opensAfterConsecutiveFailuresOnly() {
        var breaker = OutboundCircuitBreaker(failureThreshold: 3, openDuration: .seconds(30))
        #expect(breaker.admit(now: 0) == .proceed)
        #expect(breaker.record(success: false, now: 0) == nil)
        #expect(breaker.record(success: false, now: 0) == nil)
        // A success in between resets the run.
        #expect(breaker.record(success: true, now: 0) == nil)
        #expect(breaker.consecutiveFailures == 0)
        #expect(breaker.record(success: false, now: 1) == nil)
        #expect(breaker.record(success: false, now: 2) == nil)
        #expect(breaker.record(success: false, now: 3) == .open)
        #expect(breaker.state == .open)
        #expect(breaker.admit(now: 3) == .reject)
        #expect(breaker.admit(now: 3 + 29 * Self.second) == .reject)
    }

    @Test func halfOpenLetsOneProbeThroughAndItsSuccessCloses() {
        var breaker = OutboundCircuitBreaker(failureThreshold: 1, openDuration: .seconds(10))
        #expect(breaker.record(success: false, now: 0) == .open)
        let later = 10 * Self.second
        #expect(breaker.admit(now: later) == .probe)
        #expect(breaker.state == .halfOpen)
        // While the probe is out, everything else fails fast.
        #expect(breaker.admit(now: later) == .reject)
        #expect(breaker.record(success: true, now: later + 1) == .closed)
        #expect(breaker.admit(now: later + 2) == .proceed)
    }

    @Test func aFailedProbeOpensAgainForAnotherPeriod() {
        var breaker = OutboundCircuitBreaker(failureThreshold: 2, openDuration: .seconds(5))
        breaker.record(success: false, now: 0)
        breaker.record(success: false, now: 0)
        #expect(breaker.admit(now: 5 * Self.second) == .probe)
        #expect(breaker.record(success: false, now: 6 * Self.second) == .open)
        #expect(breaker.admit(now: 10 * Self.second) == .reject)
        #expect(breaker.admit(now: 11 * Self.second) == .probe)
    }

    @Test func onlyMissingAnswersAndServerErrorsCountAsFailures() {
        func answer(_ status: Int) -> Result<OutboundHTTPResponse, OutboundHTTPError> {
            .success(OutboundHTTPResponse(status: status, body: [], isKeepAlive: true))
        }
        for status in [200, 304, 400, 401, 404, 429] {
            #expect(!OutboundCircuitBreaker.isFailure(answer(status)), "status \(status)")
        }
        #expect(OutboundCircuitBreaker.isFailure(answer(500)))
        #expect(OutboundCircuitBreaker.isFailure(answer(503)))
        #expect(OutboundCircuitBreaker.isFailure(.failure(OutboundHTTPError(.timedOut, peer: .apple, "slow"))))
        #expect(OutboundCircuitBreaker.isFailure(.failure(OutboundHTTPError(.unreachable, peer: .apple, "down"))))
        #expect(
            OutboundCircuitBreaker.isFailure(.failure(OutboundHTTPError(.tlsFailed, peer: .apple, "bad certificate"))))
        #expect(!OutboundCircuitBreaker.isFailure(.failure(OutboundHTTPError(.throttled, peer: .apple, "queue full"))))
    }

    @Test func bucketSpacesCallsAtTheRateAfterTheBurst() {
        var bucket = OutboundTokenBucket(ratePerSecond: 10, burst: 2)
        let interval = Self.second / 10
        #expect(bucket.take(now: 0, maximumWait: Self.second) == 0)
        #expect(bucket.take(now: 0, maximumWait: Self.second) == 0)
        #expect(bucket.take(now: 0, maximumWait: Self.second) == interval)
        #expect(bucket.take(now: 0, maximumWait: Self.second) == 2 * interval)
        // A call that cannot wait that long is refused and takes nothing.
        #expect(bucket.take(now: 0, maximumWait: interval) == nil)
        #expect(bucket.take(now: 0, maximumWait: Self.second) == 3 * interval)
        // After a long idle time the bucket is full again, no fuller than the burst.
        let idle = 100 * Self.second
        #expect(bucket.take(now: idle, maximumWait: 0) == 0)
        #expect(bucket.take(now: idle, maximumWait: 0) == 0)
        #expect(bucket.take(now: idle, maximumWait: 0) == nil)
    }

    @Test func bucketNeverExceedsItsRateOverAnyWindow() {
        var bucket = OutboundTokenBucket(ratePerSecond: 50)
        var sendTimes: [UInt64] = []
        var now: UInt64 = 0
        // 1,000 calls arriving every millisecond: each goes out after its wait.
        for _ in 0..<1000 {
            if let wait = bucket.take(now: now, maximumWait: 100 * Self.second) { sendTimes.append(now + wait) }
            now += 1_000_000
        }
        #expect(sendTimes.count == 1000)
        // In any one-second window: at most rate + burst calls.
        var start = 0
        for end in sendTimes.indices {
            while sendTimes[end] - sendTimes[start] >= Self.second { start += 1 }
            #expect(end - start + 1 <= 50 + bucket.burst)
        }
    }
}
