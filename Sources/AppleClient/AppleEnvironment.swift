/// Which of Apple's server sets a call goes to. DeviceCheck tokens from development builds
/// and receipts of development App Attest keys (receipt field 7 `sandbox`) belong to the
/// development servers; Apple answers 400 when a token meets the wrong one.
public enum AppleEnvironment: String, Sendable, Hashable, CaseIterable {
    case production, development

    /// DeviceCheck's host (Apple, "Accessing and modifying per-device data").
    public var deviceCheckHost: String {
        switch self {
        case .production: "api.devicecheck.apple.com"
        case .development: "api.development.devicecheck.apple.com"
        }
    }

    /// The fraud-risk receipt host (Apple, "Assessing fraud risk").
    public var attestDataHost: String {
        switch self {
        case .production: "data.appattest.apple.com"
        case .development: "data-development.appattest.apple.com"
        }
    }

    /// The environment a receipt names in field 7 (`production`, or `sandbox` for
    /// development); nil for anything else.
    public init?(receiptEnvironment: String) {
        switch receiptEnvironment {
        case "production": self = .production
        case "sandbox", "development": self = .development
        default: return nil
        }
    }
}
