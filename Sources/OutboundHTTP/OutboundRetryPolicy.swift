/// When a call of the outbound client is sent once more (Apple's DeviceCheck calls): after a
/// 429, a 5xx or no answer at all, with exponential backoff and jitter, never sooner than the
/// answer's `Retry-After`, and only while
/// the call's own deadline leaves room for another attempt.
///
/// Fraud-risk refreshes do not use it: their answers are kept per key in `FraudRiskRefresh`,
/// which backs off over hours and days instead of seconds. A value, tested without sockets
/// (`OutboundRetryPolicyTests`).
package struct OutboundRetryPolicy: Sendable, Equatable {
    /// Attempts in all, the first included.
    package var maximumAttempts: Int
    /// The backoff before the second attempt; it doubles for each further one.
    package var initialBackoff: Duration
    /// The backoff never grows beyond this (before `Retry-After`).
    package var maximumBackoff: Duration
    /// An attempt is not started with less than this left of the deadline: it could not finish.
    package var minimumAttemptTime: Duration

    package init(
        maximumAttempts: Int = 3, initialBackoff: Duration = .milliseconds(200),
        maximumBackoff: Duration = .seconds(2), minimumAttemptTime: Duration = .milliseconds(500)
    ) {
        self.maximumAttempts = max(1, maximumAttempts)
        self.initialBackoff = initialBackoff
        self.maximumBackoff = maximumBackoff
        self.minimumAttemptTime = minimumAttemptTime
    }

    package enum Decision: Equatable, Sendable {
        case done
        case retry(after: Duration)
    }

    /// - Parameters:
    ///   - outcome: what the attempt numbered `attempt` (from 1) got.
    ///   - remaining: what is left of the call's deadline.
    ///   - breakerOpen: the client's breaker is open (it refused the attempt, or this failure
    ///     opened it): another attempt would be refused too.
    ///   - jitter: a number in 0...1 (random in production), spreading the backoff over its
    ///     upper half so that gateways retrying together do not arrive together.
    package func decide(
        after outcome: Result<OutboundHTTPResponse, OutboundHTTPError>, attempt: Int, remaining: Duration,
        breakerOpen: Bool,
        jitter: Double
    ) -> Decision {
        guard attempt < self.maximumAttempts, !breakerOpen, let floor = Self.retryFloor(outcome) else { return .done }
        let exponent = min(attempt - 1, 20)
        let ceiling = min(self.initialBackoff * (1 << exponent), self.maximumBackoff)
        let backoff = ceiling / 2 + ceiling / 2 * min(max(jitter, 0), 1)
        let delay = max(backoff, floor)
        guard delay + self.minimumAttemptTime <= remaining else { return .done }
        return .retry(after: delay)
    }

    /// nil when the outcome is final; else the least wait before another attempt (the answer's
    /// `Retry-After`, or zero).
    private static func retryFloor(_ outcome: Result<OutboundHTTPResponse, OutboundHTTPError>) -> Duration? {
        switch outcome {
        case .success(let response):
            guard response.status == 429 || (500...599).contains(response.status) else { return nil }
            return response.retryAfter ?? .zero
        case .failure(let error):
            // No answer came: the connection failed or was dropped. A timeout spent the
            // deadline, a TLS or framing failure will not heal in a second, and the gateway's
            // own rate limit (`<peer>_throttled` without a status) is a decision, not a failure.
            return error.code == .unreachable ? .zero : nil
        }
    }
}
