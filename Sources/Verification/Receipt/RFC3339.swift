public import Foundation

/// RFC 3339 timestamps as App Attest receipts carry them (`2020-11-21T22:13:02.796Z`).
///
/// A small strict parser instead of `ISO8601DateFormatter`: no locale, no allocation, no
/// shared formatter state, and it rejects what RFC 3339 does not allow (missing seconds,
/// out-of-range fields, a missing zone).
public enum RFC3339 {
    /// `YYYY-MM-DD(T|t| )hh:mm:ss[.fraction](Z|z|±hh:mm)`; nil if `text` is anything else.
    public static func parse(_ text: some Collection<UInt8>) -> Date? {
        let b = Array(text)
        guard b.count >= 20, b.count <= 64 else { return nil }

        func number(_ start: Int, _ count: Int) -> Int? {
            var value = 0
            for i in start..<(start + count) {
                let c = b[i]
                guard c >= 0x30, c <= 0x39 else { return nil }
                value = value * 10 + Int(c - 0x30)
            }
            return value
        }

        guard let year = number(0, 4), b[4] == UInt8(ascii: "-"),
            let month = number(5, 2), b[7] == UInt8(ascii: "-"),
            let day = number(8, 2),
            b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t") || b[10] == UInt8(ascii: " "),
            let hour = number(11, 2), b[13] == UInt8(ascii: ":"),
            let minute = number(14, 2), b[16] == UInt8(ascii: ":"),
            let second = number(17, 2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month),
            hour <= 23, minute <= 59, second <= 60
        else { return nil }

        var index = 19
        var fraction = 0.0
        if b[index] == UInt8(ascii: ".") {
            index += 1
            // Nanosecond precision at most; further digits are read and ignored.
            let start = index
            var digits = 0
            var divisor = 1
            while index < b.count, b[index] >= 0x30, b[index] <= 0x39 {
                if index - start < 9 {
                    digits = digits * 10 + Int(b[index] - 0x30)
                    divisor *= 10
                }
                index += 1
            }
            guard index > start else { return nil }
            fraction = Double(digits) / Double(divisor)
        }
        guard index < b.count else { return nil }

        var offsetSeconds = 0
        switch b[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            index += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard index + 6 == b.count, let oh = number(index + 1, 2), b[index + 3] == UInt8(ascii: ":"),
                let om = number(index + 4, 2), oh <= 23, om <= 59
            else { return nil }
            offsetSeconds = (oh * 3600 + om * 60) * (b[index] == UInt8(ascii: "-") ? -1 : 1)
            index += 6
        default:
            return nil
        }
        guard index == b.count else { return nil }

        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    public static func parse(_ text: String) -> Date? { self.parse(text.utf8) }

    /// `2020-11-21T22:13:02.796Z`: UTC with milliseconds, the form Apple's receipts use.
    public static func format(_ date: Date) -> String {
        let milliseconds = Int((date.timeIntervalSince1970 * 1000).rounded())
        let (days, msOfDay) = milliseconds.quotientAndRemainder(dividingBy: 86_400_000)
        let (day, ms) = msOfDay >= 0 ? (days, msOfDay) : (days - 1, msOfDay + 86_400_000)
        let (year, month, dayOfMonth) = civilFromDays(day)
        func pad(_ n: Int, _ width: Int) -> String {
            let text = String(n)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let seconds = ms / 1000
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(dayOfMonth, 2))T\(pad(seconds / 3600, 2)):"
            + "\(pad(seconds / 60 % 60, 2)):\(pad(seconds % 60, 2)).\(pad(ms % 1000, 3))Z"
    }

    private static func isLeap(_ year: Int) -> Bool { (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 }

    private static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// (year, month, day) of a day number since 1970-01-01 (Howard Hinnant's `civil_from_days`).
    private static func civilFromDays(_ z0: Int) -> (Int, Int, Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Days since 1970-01-01 (Howard Hinnant's `days_from_civil`).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
