import Foundation
import Testing

@testable import AppAttestClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The DeviceCheck fallback on a device without App Attest: exchange a DCDevice token at the
/// gateway, cache the gateway token until shortly before it expires, send it as
/// `X-App-Attest-Token`, and exchange again once when the gateway says it expired or is invalid.
/// A scripted gateway in process; the end-to-end run against the binary is the gateway's
/// `DeviceCheckFallbackServeTests`.
@Suite struct DeviceCheckFallbackTests {
    /// A gateway with one fallback route: issues `gw-1`, `gw-2`, … from the exchange and refuses
    /// the tokens listed in `refused` with `refusal`.
    final class FallbackGateway: HTTPTransport, @unchecked Sendable {
        private let lock = NSLock()
        private var exchanges: [[String: Any]] = []
        private var sentTokens: [String?] = []
        var refused: Set<String> = []
        var refusal = "devicecheck_token_expired"
        var expiresIn = 3600
        /// When set, the exchange answers 403 with this code.
        var exchangeRefusal: String?

        var exchangeBodies: [[String: Any]] { self.lock.withLock { self.exchanges } }
        var tokens: [String?] { self.lock.withLock { self.sentTokens } }

        func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
            let url = try #require(request.url)
            func answer(_ status: Int, _ body: String) throws -> (Data, HTTPURLResponse) {
                (
                    Data(body.utf8),
                    try #require(HTTPURLResponse(url: url, statusCode: status, httpVersion: nil, headerFields: [:]))
                )
            }
            switch url.path {
            case "/app-attest/policy":
                return try answer(
                    200,
                    """
                    {"version":1,"endpoints":{"challenge":"/app-attest/challenge","attest":"/app-attest/attest",
                     "devicecheck":"/dc/exchange"},
                     "routes":[{"match":{"path_prefix":"/v1"},"mode":"enforce","device_check_fallback":true}]}
                    """)
            case "/dc/exchange":
                let body = (try? JSONSerialization.jsonObject(with: request.httpBody ?? Data())) as? [String: Any]
                let count = self.lock.withLock {
                    self.exchanges.append(body ?? [:])
                    return self.exchanges.count
                }
                if let code = self.exchangeRefusal { return try answer(403, #"{"error":"\#(code)","message":"no"}"#) }
                return try answer(200, #"{"token":"gw-\#(count)","expires_in":\#(self.expiresIn)}"#)
            default:
                let token = request.value(forHTTPHeaderField: AttestedClient.Header.deviceCheckToken)
                let refuse = self.lock.withLock {
                    self.sentTokens.append(token)
                    return token.map { self.refused.contains($0) } ?? true
                }
                if refuse { return try answer(401, #"{"error":"\#(self.refusal)","message":"no"}"#) }
                return try answer(200, #"{"ok":true}"#)
            }
        }
    }

    /// A clock the test moves.
    final class ManualClock: AttestClock, @unchecked Sendable {
        private let lock = NSLock()
        private var current = Date(timeIntervalSince1970: 1_800_000_000)
        func now() -> Date { self.lock.withLock { self.current } }
        func advance(_ seconds: TimeInterval) { self.lock.withLock { self.current += seconds } }
        func sleep(for duration: Duration) async throws {}
    }

    struct Unsupported: AppAttestService {
        var isSupported: Bool { false }
        func generateKey() async throws -> String { throw AppAttestServiceError(.featureUnsupported) }
        func attestKey(_ keyID: String, clientDataHash: Data) async throws -> Data {
            throw AppAttestServiceError(.featureUnsupported)
        }
        func generateAssertion(_ keyID: String, clientDataHash: Data) async throws -> Data {
            throw AppAttestServiceError(.featureUnsupported)
        }
    }

    final class Tokens: DeviceCheckTokenProvider, @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        var isSupported: Bool { true }
        var generated: Int { self.lock.withLock { self.count } }
        func generateToken() async throws -> Data {
            let n = self.lock.withLock {
                self.count += 1
                return self.count
            }
            return Data("device-\(n)".utf8)
        }
    }

    func client(_ gateway: FallbackGateway, _ clock: ManualClock, _ tokens: Tokens) -> AttestedClient {
        AttestedClient(
            gateway: URL(string: "http://gateway.test")!, appID: "ABCDE12345.com.example.app",
            service: Unsupported(), keyStore: InMemoryKeyStore(), deviceCheck: tokens, transport: gateway,
            clock: clock)
    }

    func get(_ client: AttestedClient, _ path: String = "/v1/items") async throws -> Int {
        var request = URLRequest(url: URL(string: "http://gateway.test\(path)")!)
        request.setValue("spoofed", forHTTPHeaderField: AttestedClient.Header.assertion)
        return try await client.data(for: request).1.statusCode
    }

    @Test func exchangesOnceAndCachesUntilShortlyBeforeExpiry() async throws {
        let gateway = FallbackGateway()
        gateway.expiresIn = 600
        let clock = ManualClock()
        let tokens = Tokens()
        let client = self.client(gateway, clock, tokens)
        #expect(try await self.get(client) == 200)
        #expect(try await self.get(client) == 200)
        #expect(gateway.tokens == ["gw-1", "gw-1"])
        #expect(tokens.generated == 1)
        let body = try #require(gateway.exchangeBodies.first)
        #expect(body["device_token"] as? String == Data("device-1".utf8).base64EncodedString())
        #expect(body["app_id"] as? String == "ABCDE12345.com.example.app")

        // Renewed 60 s (the margin) before the expiry, not at it.
        clock.advance(539)
        #expect(try await self.get(client) == 200)
        clock.advance(2)
        #expect(try await self.get(client) == 200)
        #expect(gateway.tokens == ["gw-1", "gw-1", "gw-1", "gw-2"])
        #expect(tokens.generated == 2)
    }

    @Test func anExpiredOrInvalidAnswerReexchangesOnce() async throws {
        for refusal in ["devicecheck_token_expired", "devicecheck_token_invalid"] {
            let gateway = FallbackGateway()
            gateway.refusal = refusal
            gateway.refused = ["gw-1"]
            let client = self.client(gateway, ManualClock(), Tokens())
            #expect(try await self.get(client) == 200)
            #expect(gateway.tokens == ["gw-1", "gw-2"], "\(refusal)")

            // Refused again after the re-exchange: thrown with the gateway's code, no loop.
            gateway.refused = ["gw-2", "gw-3"]
            await #expect(throws: AttestedClientError(.init(rawValue: refusal), "")) {
                _ = try await self.get(client)
            }
            #expect(gateway.tokens == ["gw-1", "gw-2", "gw-2", "gw-3"])
        }
    }

    @Test func aBlockedDeviceIsRefusedAtTheExchange() async throws {
        let gateway = FallbackGateway()
        gateway.exchangeRefusal = "devicecheck_blocked"
        let client = self.client(gateway, ManualClock(), Tokens())
        await #expect(throws: AttestedClientError(.deviceCheckBlocked, "")) { _ = try await self.get(client) }
        #expect(gateway.tokens.isEmpty, "nothing sent to the route without a token")
        #expect(gateway.exchangeBodies.count == 1)
    }
}
