import Foundation

/// `DCDevice.current`: DeviceCheck tokens, for the gateway's DeviceCheck fallback on devices
/// without App Attest (see `AttestedClient` and docs/ios-integration.md: the gateway side is
/// issue 13 and not built yet, so no route offers the fallback today).
public protocol DeviceCheckTokenProvider: Sendable {
    var isSupported: Bool { get }
    /// A fresh, single-use DeviceCheck token.
    func generateToken() async throws -> Data
}
