import AppAttestClient
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The DeviceCheck fallback end to end: a device without App Attest, the real gateway
/// (`attest-gateway serve`) with a `fallback: devicecheck` route, and scripts/fake-apple.py over
/// TLS as Apple's DeviceCheck servers.
@Suite(.serialized)
struct DeviceCheckEndToEndTests {
    /// `DCDevice.generateToken()` as the fake understands it: base64 of `DEVICE:n` (counted).
    final class DeviceTokens: DeviceCheckTokenProvider, @unchecked Sendable {
        let device: String
        private let lock = NSLock()
        private var count = 0
        init(device: String) { self.device = device }
        var isSupported: Bool { true }
        var generated: Int { self.lock.withLock { self.count } }
        func generateToken() async throws -> Data {
            let n = self.lock.withLock {
                self.count += 1
                return self.count
            }
            return Data("\(self.device):\(n)".utf8)
        }
    }

    @Test func anUnsupportedDeviceGetsThroughTheFallbackAndReexchangesAfterExpiry() async throws {
        let environment = try await GatewayEnvironment(withFakeApple: true, deviceCheckTokenTTL: "2s")
        defer { environment.shutDown() }
        let tokens = DeviceTokens(device: "phone-e2e")
        // A zero renewal margin: the client keeps the token to its expiry, so the gateway's
        // devicecheck_token_expired answer (and the one re-exchange) is what is exercised.
        let client = environment.client(service: environment.simulator(isSupported: false), deviceCheck: tokens) {
            $0.deviceCheckRenewalMargin = .zero
        }

        let (data, response) = try await client.data(for: URLRequest(url: environment.url("/v1/dc/items")))
        #expect(response.statusCode == 200)
        let echo = try Echo(data)
        #expect(echo.value("X-App-Attest-Status") == "devicecheck")
        #expect(echo.value("X-App-Attest-App-Id") == GatewayEnvironment.appID)
        #expect(echo.value("X-App-Attest-Environment") == "development")
        #expect(echo.value("X-App-Attest-Token") == nil)
        // Cached: a second request exchanges nothing.
        _ = try await client.data(for: URLRequest(url: environment.url("/v1/dc/again")))
        #expect(tokens.generated == 1)

        // After the 2 s TTL the gateway refuses the cached token; the client exchanges once more.
        try await Task.sleep(for: .milliseconds(2300))
        let (_, later) = try await client.data(for: URLRequest(url: environment.url("/v1/dc/later")))
        #expect(later.statusCode == 200)
        #expect(tokens.generated == 2)

        // A route without the fallback still needs App Attest.
        await #expect(throws: AttestedClientError(.appAttestUnsupported, "")) {
            _ = try await client.data(for: URLRequest(url: environment.url("/v1/items")))
        }
    }

    @Test func aDeviceTokenAppleRefusesIsAnError() async throws {
        let environment = try await GatewayEnvironment(withFakeApple: true)
        defer { environment.shutDown() }
        let client = environment.client(
            service: environment.simulator(isSupported: false), deviceCheck: DeviceTokens(device: "invalid"))
        await #expect(throws: AttestedClientError(.deviceCheckTokenInvalid, "")) {
            _ = try await client.data(for: URLRequest(url: environment.url("/v1/dc/items")))
        }
    }
}
