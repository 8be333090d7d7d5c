/// A route's limits per device key (`key_limits:`): a token bucket (`rate`, `burst`) and an
/// optional daily quota, both counted per attested key on this route across the fleet.
///
/// The store applies them in the counter script, in the same round trip that advances the
/// key's counter; only a request the counter accepts is counted (see docs/design-notes.md
/// "Per-key limits").
public struct KeyLimits: Sendable, Hashable {
    /// Sustained requests per period (`10/s`, `600/min`, `3600/h`).
    public struct Rate: Sendable, Hashable {
        public enum Period: String, Sendable, Hashable, CaseIterable {
            case second = "s"
            case minute = "min"
            case hour = "h"

            public var microseconds: Int64 {
                switch self {
                case .second: 1_000_000
                case .minute: 60_000_000
                case .hour: 3_600_000_000
                }
            }
        }

        public var count: Int
        public var period: Period

        public init(count: Int, per period: Period) {
            self.count = count
            self.period = period
        }

        /// `count/period`, as the policy spells it.
        public var text: String { "\(self.count)/\(self.period.rawValue)" }

        /// Microseconds between two tokens, rounded up (so the limit never admits more than
        /// the rate says), at least 1.
        public var emissionIntervalMicroseconds: Int64 {
            let count = Int64(max(1, self.count))
            return max(1, (self.period.microseconds + count - 1) / count)
        }
    }

    /// nil: no token bucket (a daily quota alone).
    public var rate: Rate?
    /// Requests a key may send at once from a full bucket; defaults to one period's worth.
    public var burst: Int
    /// Accepted requests per key per UTC day; nil: none.
    public var dailyQuota: Int?

    public init(rate: Rate?, burst: Int? = nil, dailyQuota: Int? = nil) {
        self.rate = rate
        self.burst = burst ?? rate?.count ?? 1
        self.dailyQuota = dailyQuota
    }

    /// Largest `rate` count, `burst` and `daily_quota` accepted.
    public static let maximumCount = 1_000_000_000
    /// Longest day the quota may be counted over: the UTC day, in seconds.
    public static let daySeconds: Int64 = 86_400
}
