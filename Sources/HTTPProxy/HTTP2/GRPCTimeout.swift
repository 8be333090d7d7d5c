/// gRPC's `grpc-timeout` request header (gRPC over HTTP/2, "Requests"): 1 to 8 ASCII digits and
/// a unit, `H` hours, `M` minutes, `S` seconds, `m` milliseconds, `u` microseconds, `n`
/// nanoseconds. The gateway forwards the header unchanged and makes the call's upstream deadline
/// no later than it. Pure and bounded (at most 9 bytes are read); anything else is no timeout.
package enum GRPCTimeout {
    /// The timeout in nanoseconds (saturating), nil when `value` is not a valid `grpc-timeout`.
    package static func nanoseconds(_ value: String) -> UInt64? {
        let bytes = value.utf8
        guard bytes.count >= 2, bytes.count <= 9, let unit = bytes.last else { return nil }
        var amount: UInt64 = 0
        for byte in bytes.dropLast() {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            amount = amount * 10 + UInt64(byte - UInt8(ascii: "0"))
        }
        let scale: UInt64
        switch unit {
        case UInt8(ascii: "H"): scale = 3_600_000_000_000
        case UInt8(ascii: "M"): scale = 60_000_000_000
        case UInt8(ascii: "S"): scale = 1_000_000_000
        case UInt8(ascii: "m"): scale = 1_000_000
        case UInt8(ascii: "u"): scale = 1_000
        case UInt8(ascii: "n"): scale = 1
        default: return nil
        }
        let (product, overflow) = amount.multipliedReportingOverflow(by: scale)
        return overflow ? .max : product
    }
}
