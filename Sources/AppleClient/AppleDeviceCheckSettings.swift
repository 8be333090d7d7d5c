/// `apple.device_check:`: DeviceCheck calls (the CLI, the admin API, the fallback exchange).
public struct AppleDeviceCheckSettings: Sendable, Hashable {
    /// Which bit, when set, makes the fallback exchange refuse a device (`blocked_bit`).
    public enum BlockedBit: String, Sendable, Hashable, CaseIterable {
        case none, bit0, bit1
    }

    /// `token_ttl`'s bounds: a second (tests) to a day.
    public static let tokenTTLRange: ClosedRange<Duration> = .seconds(1) ... .seconds(86_400)

    /// `timeout`: the whole call (connect, TLS, answer). Default 5s.
    public var timeout: Duration = .seconds(5)
    /// `blocked_bit`. Default `none`.
    public var blockedBit: BlockedBit = .none
    /// `token_ttl`: how long a gateway DeviceCheck token from the exchange is valid. Default 1h.
    public var tokenTTL: Duration = .seconds(3600)
    /// `admin_token_file`: the bearer token of the admin listener's `/devicecheck/*` API
    /// (checked at load, read again at every start and reload); nil = the API answers 404.
    public var adminTokenFile: String?

    public init() {}
}
