/// Exponential reconnect delay: `initial`, doubling per failed attempt, capped at `maximum`,
/// each delay scaled by a random factor in [0.75, 1.0] so that many gateways that lost the
/// same Redis do not reconnect in lockstep. Pure; the random source is injectable.
struct ReconnectBackoff {
    let initial: Duration
    let maximum: Duration
    private(set) var failures = 0
    private var jitter: () -> Double

    init(initial: Duration, maximum: Duration, jitter: @escaping () -> Double = { Double.random(in: 0.75...1.0) }) {
        self.initial = max(initial, .milliseconds(1))
        self.maximum = max(maximum, self.initial)
        self.jitter = jitter
    }

    /// The delay before the next attempt; counts one more failure.
    mutating func nextDelay() -> Duration {
        var delay = self.initial
        var doublings = self.failures
        while doublings > 0 && delay < self.maximum {
            delay *= 2
            doublings -= 1
        }
        delay = min(delay, self.maximum)
        self.failures += 1
        return delay * min(max(self.jitter(), 0), 1)
    }

    /// A connection became ready: the next failure starts from `initial` again.
    mutating func reset() {
        self.failures = 0
    }
}
