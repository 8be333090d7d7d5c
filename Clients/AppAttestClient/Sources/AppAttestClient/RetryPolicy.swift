import Foundation

/// Exponential backoff with jitter, for enrollment (Apple's `serverUnavailable`, the gateway's
/// 503 and 429) and for protected requests the gateway refused without forwarding
/// (`store_error`, `body_budget_exhausted`).
///
/// Delay before retry `n` (0-based) is `min(maximumDelay, initialDelay * 2^n)`, scaled by a
/// random factor in `0.5...1.0` (so that many devices recovering from the same outage do not
/// come back in lockstep), and never less than the server's `Retry-After`.
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts in total, the first included. Default 5.
    public var maximumAttempts: Int
    /// Default 1 s.
    public var initialDelay: Duration
    /// Default 60 s.
    public var maximumDelay: Duration

    public init(maximumAttempts: Int = 5, initialDelay: Duration = .seconds(1), maximumDelay: Duration = .seconds(60)) {
        self.maximumAttempts = max(1, maximumAttempts)
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
    }

    /// The delay before retry number `retry` (0 = the first retry).
    /// - Parameter jitter: a value in `0...1` (random in production).
    public func delay(beforeRetry retry: Int, retryAfter: Duration? = nil, jitter: Double) -> Duration {
        var base = self.initialDelay
        for _ in 0..<min(retry, 40) where base < self.maximumDelay { base = base * 2 }
        base = min(base, self.maximumDelay)
        let scaled = base * (0.5 + 0.5 * min(max(jitter, 0), 1))
        guard let retryAfter else { return scaled }
        return max(scaled, min(retryAfter, self.maximumDelay))
    }

    /// `Retry-After` (RFC 9110 10.2.3): delay-seconds or an HTTP-date; nil when absent or bad.
    public static func retryAfter(_ value: String?, now: Date) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Int(value), seconds >= 0 { return .seconds(seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        guard let date = formatter.date(from: value) else { return nil }
        let seconds = max(0, date.timeIntervalSince(now))
        return .milliseconds(Int64(seconds * 1000))
    }
}

extension Duration {
    /// Backoff and cache lifetimes are `Duration`s; `Date` arithmetic wants seconds.
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = self.components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
