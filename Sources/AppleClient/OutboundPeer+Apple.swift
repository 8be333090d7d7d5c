public import OutboundHTTP

extension OutboundPeer {
    /// Apple's servers (DeviceCheck, fraud-risk receipts): metrics `attest_gateway_apple_*`,
    /// codes `apple_*` (`AppleError`).
    public static let apple = OutboundPeer(name: "apple", displayName: "Apple")
}
