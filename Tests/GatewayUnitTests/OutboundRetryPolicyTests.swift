import GatewayTesting
import HTTP1
import Testing

@testable import AppleClient
@testable import OutboundHTTP

@Suite struct OutboundRetryPolicyTests {
    let policy = OutboundRetryPolicy()

    func answer(_ status: Int, retryAfter: String? = nil) -> Result<OutboundHTTPResponse, OutboundHTTPError> {
        var headers = HTTPHeaders()
        if let retryAfter { headers.add(name: "Retry-After", value: retryAfter) }
        return .success(OutboundHTTPResponse(status: status, headers: headers, body: [], isKeepAlive: true))
    }

    @Test func throttlingServerErrorsAndNoAnswerAreRetriedWithGrowingJitteredBackoff() {
        for outcome in [
            self.answer(429), self.answer(500), self.answer(503),
            .failure(OutboundHTTPError(.unreachable, peer: .apple, "reset")),
        ] {
            #expect(
                self.policy.decide(after: outcome, attempt: 1, remaining: .seconds(5), breakerOpen: false, jitter: 0)
                    == .retry(after: .milliseconds(100)))
            #expect(
                self.policy.decide(after: outcome, attempt: 1, remaining: .seconds(5), breakerOpen: false, jitter: 1)
                    == .retry(after: .milliseconds(200)))
            #expect(
                self.policy.decide(after: outcome, attempt: 2, remaining: .seconds(5), breakerOpen: false, jitter: 1)
                    == .retry(after: .milliseconds(400)))
        }
        let capped = OutboundRetryPolicy(maximumAttempts: 30)
        #expect(
            capped.decide(after: self.answer(503), attempt: 20, remaining: .seconds(60), breakerOpen: false, jitter: 1)
                == .retry(after: .seconds(2)))
    }

    @Test func finalAnswersAndLocalRefusalsAreNotRetried() {
        let final: [Result<OutboundHTTPResponse, OutboundHTTPError>] = [
            self.answer(200), self.answer(400), self.answer(401), self.answer(404),
            .failure(OutboundHTTPError(.timedOut, peer: .apple, "deadline")),
            .failure(OutboundHTTPError(.tlsFailed, peer: .apple, "bad certificate")),
            .failure(OutboundHTTPError(.malformedAnswer, peer: .apple, "framing")),
            .failure(
                OutboundHTTPError(.throttled, peer: .apple, "the gateway's requests_per_second towards Apple is spent")),
        ]
        for outcome in final {
            #expect(
                self.policy.decide(after: outcome, attempt: 1, remaining: .seconds(5), breakerOpen: false, jitter: 0.5)
                    == .done)
        }
        // An open breaker would refuse the next attempt as well.
        #expect(
            self.policy.decide(
                after: self.answer(503), attempt: 1, remaining: .seconds(5), breakerOpen: true, jitter: 0)
                == .done)
    }

    @Test func retryAfterIsAFloorAndTheDeadlineAndAttemptCountAreLimits() {
        #expect(
            self.policy.decide(
                after: self.answer(429, retryAfter: "2"), attempt: 1, remaining: .seconds(5), breakerOpen: false,
                jitter: 0) == .retry(after: .seconds(2)))
        // Retry-After beyond what the deadline leaves: give up now rather than answer late.
        #expect(
            self.policy.decide(
                after: self.answer(429, retryAfter: "5"), attempt: 1, remaining: .seconds(5), breakerOpen: false,
                jitter: 0) == .done)
        // Less than the backoff plus one attempt's minimum left.
        #expect(
            self.policy.decide(
                after: self.answer(503), attempt: 1, remaining: .milliseconds(650), breakerOpen: false, jitter: 1)
                == .done)
        #expect(
            self.policy.decide(
                after: self.answer(503), attempt: 3, remaining: .seconds(5), breakerOpen: false, jitter: 0)
                == .done)
    }
}
