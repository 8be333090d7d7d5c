/// The daily budget of `decodeIntegrityToken` calls of one app (Google's default quota is
/// 10,000 calls a day per Cloud project, reset at midnight Pacific time). A value: `take`
/// counts a call or refuses it once the day's budget is spent; the day turns at midnight in
/// `America/Los_Angeles` (computed here from the US rules in force since 2007, so no time-zone
/// database is read), or at a configured UTC hour.
///
/// Per gateway process: a fleet of N gateways splits Google's quota by configuring
/// `quota_per_day` to its share (docs/operations.md).
struct PlayIntegrityQuotaBudget: Sendable, Hashable {
    enum Reset: Sendable, Hashable {
        /// Midnight in Pacific time, as Google's quota.
        case pacificMidnight
        /// This hour (0-23) UTC.
        case utcHour(Int)
    }

    let limit: Int
    let reset: Reset
    private(set) var used = 0
    /// Unix seconds at which the current day started (nil: no call yet).
    private var dayStart: Int64?

    init(limit: Int, reset: Reset = .pacificMidnight) {
        self.limit = max(0, limit)
        self.reset = reset
    }

    /// Counts one call at `now` (Unix seconds); false when today's budget is spent.
    mutating func take(now: Int64) -> Bool {
        let start = self.dayStart(containing: now)
        if start != self.dayStart {
            self.dayStart = start
            self.used = 0
        }
        guard self.used < self.limit else { return false }
        self.used += 1
        return true
    }

    /// Gives back a call that Google never counted (refused before it left: breaker open).
    mutating func refund() {
        self.used = max(0, self.used - 1)
    }

    /// Seconds until the budget resets, from `now` (for `Retry-After`).
    func secondsUntilReset(now: Int64) -> Int64 {
        // A budget day lasts 23 to 25 hours: 26 hours after its start lies in the next one.
        let next = self.dayStart(containing: self.dayStart(containing: now) + 26 * 3600)
        return max(1, next - now)
    }

    /// The Unix second at which the budget day holding `now` began.
    func dayStart(containing now: Int64) -> Int64 {
        switch self.reset {
        case .utcHour(let hour):
            let shifted = now - Int64(hour) * 3600
            return Self.floorDiv(shifted, 86_400) * 86_400 + Int64(hour) * 3600
        case .pacificMidnight:
            let offset = self.offsetSeconds(at: now)
            let local = now + offset
            let localMidnight = Self.floorDiv(local, 86_400) * 86_400
            // The offset at local midnight (DST never changes at midnight in the US: at 02:00).
            return localMidnight - self.offsetSeconds(at: localMidnight - offset)
        }
    }

    /// Pacific time's offset from UTC at `utc`: -7 h in daylight time (from the second Sunday
    /// of March, 02:00 PST = 10:00 UTC, to the first Sunday of November, 02:00 PDT = 09:00
    /// UTC), -8 h otherwise. Irrelevant for `.utcHour`.
    func offsetSeconds(at utc: Int64) -> Int64 {
        guard case .pacificMidnight = self.reset else { return 0 }
        let year = Self.civilYear(utc)
        let dstStart = Self.nthSunday(year: year, month: 3, n: 2) + 10 * 3600
        let dstEnd = Self.nthSunday(year: year, month: 11, n: 1) + 9 * 3600
        return utc >= dstStart && utc < dstEnd ? -7 * 3600 : -8 * 3600
    }

    private static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }

    /// Unix seconds of 00:00 UTC of the nth Sunday of `month` in `year`.
    static func nthSunday(year: Int64, month: Int64, n: Int64) -> Int64 {
        let first = Self.daysFromCivil(year: year, month: month, day: 1)
        // 1970-01-01 was a Thursday (weekday 4, Sunday = 0).
        let weekday = (first % 7 + 7 + 4) % 7
        let firstSunday = first + (7 - weekday) % 7
        return (firstSunday + 7 * (n - 1)) * 86_400
    }

    /// The proleptic Gregorian year of a Unix time (UTC).
    static func civilYear(_ utc: Int64) -> Int64 {
        // Howard Hinnant's civil_from_days.
        let z = Self.floorDiv(utc, 86_400) + 719_468
        let era = Self.floorDiv(z, 146_097)
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let month = mp < 10 ? mp + 3 : mp - 9
        return yoe + era * 400 + (month <= 2 ? 1 : 0)
    }

    /// Days since 1970-01-01 of a civil date (Howard Hinnant's days_from_civil).
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = Self.floorDiv(y, 400)
        let yoe = y - era * 400
        let mp = month > 2 ? month - 3 : month + 9
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
