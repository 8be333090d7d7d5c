/// `apple.device_check:`: DeviceCheck calls (the CLI, the admin API, the fallback exchange).
public struct AppleDeviceCheckSettings: Sendable, Hashable {
    /// Which bit, when set, makes the fallback exchange refuse a device (`blocked_bit`).
    public enum BlockedBit: String, Sendable, Hashable, CaseIterable {
        case none, bit0, bit1
    }

    /// `timeout`: the whole call (connect, TLS, answer). Default 5s.
    public var timeout: Duration = .seconds(5)
    /// `blocked_bit`. Default `none`.
    public var blockedBit: BlockedBit = .none

    public init() {}
}
