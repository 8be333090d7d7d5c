/// Decodes a route's `key_limits:` into `KeyLimits`.
///
/// | key | type | default |
/// |---|---|---|
/// | `key_limits.rate` | `N/s`, `N/min` or `N/h`, N 1-1000000000 | none (no token bucket) |
/// | `key_limits.burst` | integer 1-1000000000, with `rate` only | the rate's N |
/// | `key_limits.daily_quota` | integer 1-1000000000 (per UTC day) | none |
///
/// At least one of `rate` and `daily_quota` is required: an empty block would silently limit
/// nothing.
struct KeyLimitsDecoder {
    static let keys = ["rate", "burst", "daily_quota"]

    let reader: PolicyScalarReader

    func decode(_ node: YAMLNode) throws(PolicyError) -> KeyLimits {
        let fields = try self.reader.mapping(node, keys: Self.keys)
        var rate: KeyLimits.Rate?
        if let n = fields["rate"] {
            let text = try self.reader.string(n, expected: "a rate like \"10/s\", \"600/min\" or \"3600/h\"")
            guard let parsed = Self.rate(text) else {
                throw self.reader.error(
                    .invalidValue, n,
                    "expected a rate N/s, N/min or N/h with N from 1 to \(KeyLimits.maximumCount); found \(PolicyScalarReader.quote(text))"
                )
            }
            rate = parsed
        }
        var burst: Int?
        if let n = fields["burst"] {
            guard rate != nil else {
                throw self.reader.error(.invalidValue, n, "burst applies to rate, which is not set")
            }
            burst = try self.reader.integer(n, in: 1...KeyLimits.maximumCount)
        }
        var quota: Int?
        if let n = fields["daily_quota"] {
            quota = try self.reader.integer(n, in: 1...KeyLimits.maximumCount)
        }
        guard rate != nil || quota != nil else {
            throw self.reader.error(
                .missingKey, node.mark, fields.path("rate"),
                "key_limits needs rate (e.g. \"10/s\"), daily_quota, or both")
        }
        return KeyLimits(rate: rate, burst: burst, dailyQuota: quota)
    }

    /// `N/s`, `N/min`, `N/h`; nil for anything else.
    static func rate(_ text: String) -> KeyLimits.Rate? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let period = KeyLimits.Rate.Period(rawValue: String(parts[1])),
            parts[0].utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let count = Int(parts[0]), (1...KeyLimits.maximumCount).contains(count)
        else { return nil }
        return KeyLimits.Rate(count: count, per: period)
    }
}
