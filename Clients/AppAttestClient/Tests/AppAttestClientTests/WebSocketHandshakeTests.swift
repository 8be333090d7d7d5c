import AppAttestClient
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `webSocketRequest(for:)` against the real gateway: the handshake it signs is judged as the
/// `GET` it is. (Linux's URLSession has no WebSocket transport, so the handshake is sent as a
/// plain GET on routes without `websocket: true`: the gateway verifies it and the echo upstream
/// shows the verdict; the tunnel itself is tested in the gateway's own suites.)
@Suite(.serialized)
struct WebSocketHandshakeTests {
    /// The signed handshake, sent over plain http (the test gateway's listener) as the gateway
    /// would receive its head.
    private func send(_ handshake: URLRequest) async throws -> (Data, HTTPURLResponse) {
        var request = handshake
        let text = try #require(handshake.url).absoluteString
        for scheme in ["wss://", "ws://"] where text.hasPrefix(scheme) {
            request.url = URL(string: "http://" + text.dropFirst(scheme.count))
        }
        return try await URLSessionTransport().send(request)
    }

    @Test func eachHandshakeCarriesOneFreshAssertionTheGatewayVerifiesOnce() async throws {
        let environment = try await GatewayEnvironment()
        defer { environment.shutDown() }
        let service = environment.simulator()
        let client = environment.client(service: service)
        let url = try #require(URL(string: "ws://127.0.0.1:\(environment.proxyPort)/v1/items/live?room=7"))

        let handshake = try await client.webSocketRequest(for: URLRequest(url: url))
        #expect(handshake.url == url)
        #expect(handshake.httpMethod == "GET")
        #expect(handshake.value(forHTTPHeaderField: AttestedClient.Header.assertion) != nil)
        let (data, response) = try await self.send(handshake)
        #expect(response.statusCode == 200)
        let echo = try Echo(data)
        #expect(echo.target == "/v1/items/live?room=7")
        #expect(echo.value("X-App-Attest-Status") == "verified")
        #expect(echo.value("X-App-Attest-Counter") == "1")

        // A handshake is single use: sent again, it is a replay.
        let (_, replay) = try await self.send(handshake)
        #expect(replay.statusCode == 401)
        // A reconnect signs anew.
        let again = try await client.webSocketRequest(for: URLRequest(url: url))
        let (againData, againResponse) = try await self.send(again)
        #expect(againResponse.statusCode == 200)
        #expect(try Echo(againData).value("X-App-Attest-Counter") == "2")
        #expect(service.calls("attestKey") == 1)
    }

    @Test func aChallengeRouteGetsAFreshChallengePerHandshakeAndOffRoutesNothing() async throws {
        let environment = try await GatewayEnvironment()
        defer { environment.shutDown() }
        let service = environment.simulator()
        let client = environment.client(service: service)
        let premium = try #require(URL(string: "wss://127.0.0.1:\(environment.proxyPort)/v1/premium/feed"))
        let first = try await client.webSocketRequest(for: URLRequest(url: premium))
        let second = try await client.webSocketRequest(for: URLRequest(url: premium))
        let challenge = try #require(first.value(forHTTPHeaderField: AttestedClient.Header.challenge))
        #expect(challenge != second.value(forHTTPHeaderField: AttestedClient.Header.challenge))
        let (data, response) = try await self.send(first)
        #expect(response.statusCode == 200)
        #expect(try Echo(data).value("X-App-Attest-Status") == "verified")

        var spoofed = URLRequest(url: try #require(URL(string: "ws://127.0.0.1:\(environment.proxyPort)/public/x")))
        spoofed.setValue("forged", forHTTPHeaderField: AttestedClient.Header.assertion)
        let open = try await client.webSocketRequest(for: spoofed)
        #expect(open.value(forHTTPHeaderField: AttestedClient.Header.assertion) == nil)
        #expect(service.calls("generateAssertion") == 2)
    }

    @Test func onlyABodylessGetToAWebSocketOrHTTPURLIsAHandshake() async throws {
        let environment = try await GatewayEnvironment()
        defer { environment.shutDown() }
        let client = environment.client(service: environment.simulator())
        var post = URLRequest(url: try #require(URL(string: "ws://127.0.0.1:\(environment.proxyPort)/v1/items/x")))
        post.httpMethod = "POST"
        let refused = await #expect(throws: AttestedClientError.self) { try await client.webSocketRequest(for: post) }
        #expect(refused?.code == .invalidRequest)
        var withBody = URLRequest(url: try #require(URL(string: "ws://127.0.0.1:\(environment.proxyPort)/v1/items/x")))
        withBody.httpBody = Data("x".utf8)
        await #expect(throws: AttestedClientError.self) { try await client.webSocketRequest(for: withBody) }
        let ftp = URLRequest(url: try #require(URL(string: "ftp://127.0.0.1/v1/items/x")))
        await #expect(throws: AttestedClientError.self) { try await client.webSocketRequest(for: ftp) }
    }
}
