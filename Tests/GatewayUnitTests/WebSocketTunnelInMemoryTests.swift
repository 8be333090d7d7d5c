import GatewayTesting
import Testing

@testable import GatewayIO
@testable import HTTPProxy
@testable import PolicyModel

/// WebSocket upgrades through a whole `ProxyConnection` (`InMemoryProxyHarness`, no sockets):
/// the test is the client and the upstream. A tunnel starts only after a 101 that answers the
/// client's upgrade on a `websocket: true` route; everything else stays HTTP.
@Suite struct WebSocketTunnelInMemoryTests {
    static let key = "dGhlIHNhbXBsZSBub25jZQ=="
    static let upgrade =
        "GET /chat HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        + "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n"
    static let switching =
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + "Sec-WebSocket-Accept: \(WebSocketUpgrade.acceptValue(forKey: key))\r\n\r\n"

    /// A harness whose one route ("all") allows WebSockets unless `websocket` is false.
    static func harness(websocket: Bool = true, tunnels: TunnelPolicy = TunnelPolicy(), tls: Bool = false) throws
        -> InMemoryProxyHarness
    {
        let harness = try InMemoryProxyHarness(tls: tls)
        harness.server.update { snapshot in
            snapshot.websocketRoutes = websocket ? ["all"] : []
            snapshot.tunnels = tunnels
        }
        return harness
    }

    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    /// A tunnel through `harness`: the client's upgrade reached the upstream, which answered 101.
    static func openTunnel(_ harness: InMemoryProxyHarness, sourceLocation: SourceLocation = #_sourceLocation)
        async throws -> (client: InMemoryHTTPPeer, upstream: InMemoryHTTPPeer)
    {
        let client = try harness.connect()
        client.send(Self.upgrade)
        let upstream = try #require(await harness.upstream.accept(), sourceLocation: sourceLocation)
        _ = try await upstream.readRequest()
        upstream.send(Self.switching)
        #expect(try await client.readResponse().status == 101, sourceLocation: sourceLocation)
        return (client, upstream)
    }

    /// Plain and over TLS (the relay reads and writes through the client's TLS session).
    @Test(arguments: [false, true])
    func anAnsweredUpgradeTunnelsBytesBothWaysUntilBothSidesClose(tls: Bool) async throws {
        let harness = try Self.harness(tls: tls)
        let metrics = harness.server.metrics.tunnels
        let client = try harness.connect()
        client.send(Self.upgrade)
        // With TLS nothing moves the test's side but the test: the handshake runs inside this wait.
        #expect(await client.waitUntilSent())
        let upstream = try #require(await harness.upstream.accept())
        let request = try await upstream.readRequest()
        #expect(request.header("Upgrade") == "websocket")
        #expect(request.header("Connection") == "Upgrade")
        #expect(request.header("Sec-WebSocket-Key") == Self.key)
        #expect(request.header("Sec-WebSocket-Version") == "13")
        #expect(request.header("X-App-Attest-Status") == "skipped", "the gate judged the upgrade")

        // The upstream's first frame may follow its 101 in the same write.
        upstream.send(Self.switching + "hello from upstream")
        let response = try await client.readResponse()
        #expect(response.status == 101)
        #expect(response.header("Upgrade") == "websocket")
        #expect(response.header("Connection") == "Upgrade")
        #expect(response.header("Sec-WebSocket-Accept") == WebSocketUpgrade.acceptValue(forKey: Self.key))
        #expect(response.header("X-Request-Id") != nil)
        #expect(await client.waitForReceived(atLeast: 19))
        #expect(Self.text(client.received) == "hello from upstream")
        #expect(metrics.open.value64 == 1)

        // Bytes that look like HTTP are only bytes now: they reach the upstream unchanged.
        let frame = "GET /admin HTTP/1.1\r\nHost: t\r\n\r\n"
        client.send(frame)
        #expect(await upstream.waitForReceived(atLeast: frame.utf8.count))
        #expect(Self.text(upstream.received) == frame)

        // The client half-closes; the upstream still answers, then closes too.
        client.shutdownOutput()
        #expect(await upstream.waitForEndOfStream())
        upstream.send("last words")
        #expect(await client.waitForReceived(atLeast: 19 + 10))
        upstream.close()
        #expect(await client.waitForEndOfStream())
        #expect(
            await eventually(timeout: InMemoryHTTPPeer.patience, interval: .milliseconds(1)) { () async -> Bool in
                harness.openConnections == 0
            })
        #expect(metrics.open.value64 == 0)
        #expect(metrics.closedCount(.clientClosed) == 1)
        #expect(metrics.bytesFromClient.value64 == UInt64(frame.utf8.count))
        #expect(metrics.bytesFromUpstream.value64 == UInt64(19 + 10))
        #expect(harness.upstream.connectionCount == 1)
        await harness.stop()
    }

    @Test func onARouteWithoutWebSocketTheUpgradeIsPlainHTTPAndA101IsA502() async throws {
        let harness = try Self.harness(websocket: false)
        let client = try harness.connect()
        client.send(Self.upgrade)
        let upstream = try #require(await harness.upstream.accept())
        let request = try await upstream.readRequest()
        #expect(request.header("Upgrade") == nil)
        #expect(request.header("Connection") == nil)
        upstream.send(Self.switching + "frame")
        let response = try await client.readResponse()
        #expect(response.status == 502)
        #expect(response.bodyText.contains("upstream_invalid_response"))
        #expect(harness.server.metrics.tunnels.open.value64 == 0)
        await harness.stop()
    }

    @Test func anUnasked101IsA502OnAWebSocketRouteToo() async throws {
        let harness = try Self.harness()
        let client = try harness.connect()
        client.send("GET /plain HTTP/1.1\r\nHost: t\r\n\r\n")
        let upstream = try #require(await harness.upstream.accept())
        _ = try await upstream.readRequest()
        upstream.send(Self.switching)
        #expect(try await client.readResponse().status == 502)
        await harness.stop()
    }

    @Test func a101WithTheWrongAcceptIsA502AndTheConnectionStaysHTTP() async throws {
        let harness = try Self.harness()
        let client = try harness.connect()
        client.send(Self.upgrade)
        let upstream = try #require(await harness.upstream.accept())
        _ = try await upstream.readRequest()
        upstream.send(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Accept: \(WebSocketUpgrade.acceptValue(forKey: "AAAAAAAAAAAAAAAAAAAAAA=="))\r\n\r\n")
        let response = try await client.readResponse()
        #expect(response.status == 502)
        #expect(response.bodyText.contains("upstream_invalid_response"))
        #expect(await upstream.waitForEndOfStream(), "that upstream connection is never reused")

        client.send("GET /next HTTP/1.1\r\nHost: t\r\n\r\n")
        let second = try #require(await harness.upstream.accept())
        #expect(try await second.readRequest().target == "/next")
        second.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(try await client.readResponse().bodyText == "ok")
        #expect(harness.server.metrics.tunnels.open.value64 == 0)
        await harness.stop()
    }

    /// The client sends the upgrade and, at once, bytes that look like a second request; the
    /// upstream refuses the upgrade. Those bytes are the next HTTP request (routed and judged),
    /// never tunnelled.
    @Test func bytesBehindARefusedUpgradeAreTheNextRequestNotTunnelled() async throws {
        let harness = try Self.harness()
        let client = try harness.connect()
        client.send(Self.upgrade + "GET /second HTTP/1.1\r\nHost: t\r\nX-App-Attest-Status: verified\r\n\r\n")
        let upstream = try #require(await harness.upstream.accept())
        #expect(try await upstream.readRequest().target == "/chat")
        upstream.send("HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno")
        let refused = try await client.readResponse()
        #expect(refused.status == 403)
        #expect(refused.header("Upgrade") == nil)

        let next = try #require(await harness.upstream.accept())
        let second = try await next.readRequest()
        #expect(second.target == "/second")
        #expect(second.header("X-App-Attest-Status") == "skipped", "judged by the gate, the client's copy dropped")
        #expect(second.header("X-Forwarded-For") == "198.51.100.7")
        #expect(upstream.received.isEmpty, "nothing reached the refusing upstream connection after its answer")
        next.send("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        #expect(try await client.readResponse().status == 200)
        #expect(harness.server.metrics.tunnels.open.value64 == 0)
        await harness.stop()
    }

    @Test func aMalformedUpgradeIsRefusedWithoutReachingTheUpstream() async throws {
        let harness = try Self.harness()
        let client = try harness.connect()
        client.send(
            "GET /chat HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                + "Sec-WebSocket-Key: c2hvcnQ=\r\nSec-WebSocket-Version: 13\r\n\r\n")
        let response = try await client.readResponse()
        #expect(response.status == 400)
        #expect(response.bodyText.contains("websocket_upgrade_invalid"))
        #expect(await client.waitForEndOfStream())
        #expect(harness.upstream.connectionCount == 0)
        await harness.stop()
    }

    @Test func anUpgradeWithABodyIsRefused() async throws {
        let harness = try Self.harness()
        let client = try harness.connect()
        client.send(
            "GET /chat HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 4\r\n"
                + "Sec-WebSocket-Key: \(Self.key)\r\nSec-WebSocket-Version: 13\r\n\r\nGET ")
        let response = try await client.readResponse()
        #expect(response.status == 400)
        #expect(response.bodyText.contains("websocket_upgrade_invalid"))
        #expect(harness.upstream.connectionCount == 0)
        await harness.stop()
    }

    /// A silent tunnel is closed at `tunnels.idle_timeout` (here 50 ms) and counted.
    @Test func aSilentTunnelIsClosedAtItsIdleTimeout() async throws {
        let harness = try Self.harness(
            tunnels: TunnelPolicy(idleTimeout: .milliseconds(50), maxLifetime: .seconds(3600)))
        let (client, upstream) = try await Self.openTunnel(harness)
        #expect(await client.waitForEndOfStream())
        #expect(await upstream.waitForEndOfStream())
        #expect(harness.server.metrics.tunnels.closedCount(.idleTimeout) == 1)
        #expect(harness.openConnections == 0)
        await harness.stop()
    }

    /// A tunnel is closed at `tunnels.max_lifetime` (here 100 ms) while the client keeps sending;
    /// counted as `max_lifetime`. (That traffic postpones only the idle deadline is
    /// `TunnelStateMachineTests`': here the test's sends may start after the 100 ms under load.)
    @Test func aTunnelIsClosedAtItsMaximumLifetimeWhateverItsTraffic() async throws {
        let harness = try Self.harness(
            tunnels: TunnelPolicy(idleTimeout: .seconds(3600), maxLifetime: .milliseconds(100)))
        let (client, upstream) = try await Self.openTunnel(harness)
        let closed = await eventually(timeout: InMemoryHTTPPeer.patience, interval: .milliseconds(5)) {
            () async -> Bool in
            client.send("x")
            upstream.pump()
            // Writing into a closed stream fails before its end is read: either shows the close.
            return client.sawEndOfStream || client.failure != nil
        }
        #expect(closed)
        #expect(harness.server.metrics.tunnels.closedCount(.maxLifetime) == 1)
        #expect(harness.server.metrics.tunnels.closedCount(.idleTimeout) == 0)
        await harness.stop()
    }

    /// A client that sends faster than the upstream reads: the gateway stops reading the client
    /// (bounded buffering), and every byte still arrives in order once the upstream reads.
    @Test func aFastSenderIsHeldBackAndEveryByteArrives() async throws {
        let harness = try InMemoryProxyHarness(pipeCapacity: 16 * 1024)
        harness.server.update { $0.websocketRoutes = ["all"] }
        let (client, upstream) = try await Self.openTunnel(harness)
        let payload = (0..<2_000_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        client.send(payload)
        // The upstream does not read yet: however long the gateway is given, it stops reading
        // the client once about `highWaterMark` waits for the upstream, so 2 MB never all go.
        for _ in 0..<300 {
            client.pump()
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(!client.hasSentEverything)
        let arrived = await eventually(timeout: InMemoryHTTPPeer.patience, interval: .milliseconds(1)) {
            () async -> Bool in
            client.pump()
            upstream.pump()
            return upstream.received.count >= payload.count
        }
        #expect(arrived)
        #expect(upstream.received == payload)
        await harness.stop()
    }
}
