import Foundation

/// `DCDevice.current`: DeviceCheck tokens, for the gateway's DeviceCheck fallback on devices
/// without App Attest (see `AttestedClient` and docs/ios-integration.md). The client exchanges
/// one at the gateway's `POST /app-attest/devicecheck` for a short-lived gateway token.
public protocol DeviceCheckTokenProvider: Sendable {
    var isSupported: Bool { get }
    /// A fresh, single-use DeviceCheck token.
    func generateToken() async throws -> Data
}
