/// The global rate limit of an outbound client (Apple's: `apple.fraud_risk.requests_per_second`,
/// one bucket per gateway shared by DeviceCheck and fraud-risk calls): a value, the caller
/// passes the time.
///
/// A call takes a token; when none is left it is told how long to wait for the next one (the
/// client defers it on its loop, never blocking) or, when that wait exceeds what the call can
/// afford, refused (`<peer>_throttled`, without asking the peer). Tokens are reserved ahead: the
/// waiting calls go out spaced by 1/rate, not all at once when one token appears.
package struct OutboundTokenBucket: Sendable, Hashable {
    package let ratePerSecond: Int
    package let burst: Int
    /// Nanoseconds: when the bucket is back to `burst` tokens if nothing else is taken. Each
    /// call pushes it by one interval; a time in the past means a full bucket.
    private var fullAt: UInt64 = 0

    package init(ratePerSecond: Int, burst: Int? = nil) {
        self.ratePerSecond = max(1, ratePerSecond)
        self.burst = max(1, burst ?? max(1, ratePerSecond / 10))
    }

    private var interval: UInt64 { 1_000_000_000 / UInt64(self.ratePerSecond) }

    /// Takes a token at `now`: the wait before the call may go out (0: at once), or nil when
    /// the wait would exceed `maximumWait` (nothing is taken then).
    package mutating func take(now: UInt64, maximumWait: UInt64) -> UInt64? {
        let capacity = UInt64(self.burst) * self.interval
        // An idle bucket refills to `burst`, no more.
        let start = max(self.fullAt, now)
        let next = start + self.interval
        // The call may go out once `next - now` fits into the burst window.
        let wait = next > now + capacity ? next - now - capacity : 0
        guard wait <= maximumWait else { return nil }
        self.fullAt = next
        return wait
    }
}
