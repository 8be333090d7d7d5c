/// The two per-device bits and the month they last changed, as `query_two_bits` returns them.
/// The team decides what each bit means (for example bit0 "claimed the promotion", bit1
/// "flagged for fraud"); they survive reinstalls and are per device and developer team.
public struct DeviceCheckBits: Sendable, Hashable {
    public var bit0: Bool
    public var bit1: Bool
    /// `YYYY-MM` (UTC month of the last update), as Apple writes it.
    public var lastUpdateTime: String

    public init(bit0: Bool, bit1: Bool, lastUpdateTime: String) {
        self.bit0 = bit0
        self.bit1 = bit1
        self.lastUpdateTime = lastUpdateTime
    }

    /// True for `YYYY-MM` with a month 01–12.
    static func isMonth(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 7, bytes[4] == UInt8(ascii: "-") else { return false }
        let digits = bytes[0..<4] + bytes[5..<7]
        guard digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return false }
        let month = Int(bytes[5] - 0x30) * 10 + Int(bytes[6] - 0x30)
        return (1...12).contains(month)
    }
}
