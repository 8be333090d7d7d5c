package import PolicyModel

/// Which of a route's `key_limits` refused a request (the metric's `limit` label).
package enum KeyLimitKind: String, Sendable, Hashable, CaseIterable {
    case rate
    case dailyQuota = "daily_quota"
}

/// A request refused by a per-key limit: which one, and when a retry can pass.
package struct KeyLimitRefusal: Sendable, Hashable {
    package var limit: KeyLimitKind
    /// Whole seconds until a token is back (rate) or the UTC day ends (daily quota), at least 1.
    package var retryAfterSeconds: Int

    package init(limit: KeyLimitKind, retryAfterSeconds: Int) {
        self.limit = limit
        self.retryAfterSeconds = retryAfterSeconds
    }
}

/// The limits one counter advance is charged against: the route's `key_limits` under the
/// route's name (each route keeps its own bucket and quota for a key).
package struct KeyLimitCharge: Sendable, Hashable {
    package var route: String
    package var limits: KeyLimits

    package init(route: String, limits: KeyLimits) {
        self.route = route
        self.limits = limits
    }
}

/// One key's state under one route's `key_limits`, and the rule that charges a request to it:
/// the exact arithmetic of the counter script (`RedisStore.advanceCounterScript`), in Swift for
/// `MemoryStore` and tests.
///
/// The bucket is GCRA (a token bucket kept as one number): `theoreticalArrival` is when the
/// bucket would be full again, in microseconds. A request at `now` passes iff
/// `max(theoreticalArrival, now) + interval - burst * interval <= now`, and then moves it by
/// one interval; so a full bucket admits `burst` requests at once and then one per interval.
/// The quota counts accepted requests of the UTC day numbered `day` (Unix seconds / 86400).
/// All arithmetic is on whole microseconds, so Lua's doubles (exact below 2^53) and Swift agree.
package struct KeyLimitLedger: Sendable, Hashable {
    package var theoreticalArrival: Int64?
    package var day: Int64?
    package var acceptedToday: Int

    package init(theoreticalArrival: Int64? = nil, day: Int64? = nil, acceptedToday: Int = 0) {
        self.theoreticalArrival = theoreticalArrival
        self.day = day
        self.acceptedToday = acceptedToday
    }

    /// Charges one request at `nowMicroseconds` (Unix time): nil when it passes (the ledger
    /// then counts it), else the refusal (the ledger unchanged). The quota is judged first: when
    /// both refuse, the longer wait is the true one.
    package mutating func charge(_ limits: KeyLimits, nowMicroseconds now: Int64) -> KeyLimitRefusal? {
        let seconds = now / 1_000_000
        var next = self
        if let quota = limits.dailyQuota {
            let today = seconds / KeyLimits.daySeconds
            let used = self.day == today ? self.acceptedToday : 0
            guard used < quota else {
                return KeyLimitRefusal(
                    limit: .dailyQuota, retryAfterSeconds: Int(KeyLimits.daySeconds - seconds % KeyLimits.daySeconds))
            }
            next.day = today
            next.acceptedToday = used + 1
        }
        if let rate = limits.rate {
            let interval = rate.emissionIntervalMicroseconds
            let arrival = max(self.theoreticalArrival ?? now, now) + interval
            let allowedAt = arrival - Int64(limits.burst) * interval
            guard allowedAt <= now else {
                return KeyLimitRefusal(limit: .rate, retryAfterSeconds: Int((allowedAt - now + 999_999) / 1_000_000))
            }
            next.theoreticalArrival = arrival
        }
        self = next
        return nil
    }
}
