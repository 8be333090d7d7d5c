import Foundation
import Testing

@testable import AppAttestClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What the client sends when App Attest is unavailable, on routes whose policy document
/// allows a debug token (the DeviceCheck fallback has its own suite, `DeviceCheckFallbackTests`).
/// These tests serve a version-1 document in process and record what the client sends.
@Suite struct DebugTokenTests {
    /// Answers the policy document with one route, and records every other request.
    final class RecordingTransport: HTTPTransport, @unchecked Sendable {
        let route: String
        private let lock = NSLock()
        private var seen: [URLRequest] = []

        init(route: String) { self.route = route }

        var requests: [URLRequest] { self.lock.withLock { self.seen } }

        func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
            let url = try #require(request.url)
            let ok = try #require(HTTPURLResponse(url: url, statusCode: 200, httpVersion: nil, headerFields: [:]))
            if url.path == "/app-attest/policy" {
                let body = """
                    {"version":1,"endpoints":{"challenge":"/app-attest/challenge","attest":"/app-attest/attest"},
                     "routes":[\(self.route)]}
                    """
                return (Data(body.utf8), ok)
            }
            self.lock.withLock { self.seen.append(request) }
            return (Data("{}".utf8), ok)
        }
    }

    struct UnsupportedService: AppAttestService {
        var isSupported: Bool { false }
        func generateKey() async throws -> String { throw AppAttestServiceError(.featureUnsupported) }
        func attestKey(_ keyID: String, clientDataHash: Data) async throws -> Data {
            throw AppAttestServiceError(.featureUnsupported)
        }
        func generateAssertion(_ keyID: String, clientDataHash: Data) async throws -> Data {
            throw AppAttestServiceError(.featureUnsupported)
        }
    }

    struct TokenProvider: DeviceCheckTokenProvider {
        var isSupported: Bool { true }
        func generateToken() async throws -> Data { Data([1, 2, 3]) }
    }

    private func client(route: String, debugToken: String?) -> (AttestedClient, RecordingTransport) {
        let transport = RecordingTransport(route: route)
        var configuration = AttestedClient.Configuration()
        #if DEBUG
            configuration.debugToken = debugToken
        #endif
        let client = AttestedClient(
            gateway: URL(string: "http://gateway.test")!,
            service: UnsupportedService(),
            keyStore: InMemoryKeyStore(),
            deviceCheck: TokenProvider(),
            transport: transport,
            configuration: configuration
        )
        return (client, transport)
    }

    #if DEBUG
        @Test func debugTokenIsSentOnRoutesThatAllowIt() async throws {
            let route = #"{"match":{"path_prefix":"/v1"},"mode":"enforce","allow_debug_tokens":true}"#
            let (client, transport) = self.client(route: route, debugToken: "dev-token-1")
            var request = URLRequest(url: URL(string: "http://gateway.test/v1/items")!)
            request.setValue("spoofed", forHTTPHeaderField: AttestedClient.Header.assertion)
            _ = try await client.data(for: request)
            let sent = try #require(transport.requests.first)
            #expect(sent.value(forHTTPHeaderField: AttestedClient.Header.debugToken) == "dev-token-1")
            #expect(sent.value(forHTTPHeaderField: AttestedClient.Header.assertion) == nil)
        }
    #endif

    @Test func withoutPermissionAnUnsupportedDeviceGetsATypedError() async throws {
        let route = #"{"match":{"path_prefix":"/v1"},"mode":"enforce","allow_debug_tokens":false}"#
        let (client, transport) = self.client(route: route, debugToken: "dev-token-1")
        await #expect(throws: AttestedClientError(.appAttestUnsupported, "")) {
            try await client.data(for: URLRequest(url: URL(string: "http://gateway.test/v1/items")!))
        }
        #expect(transport.requests.isEmpty)
    }

    @Test func aDeviceCheckProviderThatIsNotSupportedLeavesTheTypedError() async throws {
        let route = #"{"match":{"path_prefix":"/v1"},"mode":"enforce","device_check_fallback":true}"#
        let transport = RecordingTransport(route: route)
        struct Unsupported: DeviceCheckTokenProvider {
            var isSupported: Bool { false }
            func generateToken() async throws -> Data { Data() }
        }
        let client = AttestedClient(
            gateway: URL(string: "http://gateway.test")!, service: UnsupportedService(), keyStore: InMemoryKeyStore(),
            deviceCheck: Unsupported(), transport: transport)
        await #expect(throws: AttestedClientError(.appAttestUnsupported, "")) {
            try await client.data(for: URLRequest(url: URL(string: "http://gateway.test/v1/items")!))
        }
        #expect(transport.requests.isEmpty)
    }
}
