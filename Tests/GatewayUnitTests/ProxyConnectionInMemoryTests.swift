import GatewayTesting
import Glibc
import Testing

@testable import GatewayIO
@testable import HTTPProxy
@testable import PolicyModel

/// A whole `ProxyConnection` on the real event loop, over in-memory streams on both sides
/// (`InMemoryProxyHarness`): the test is the client and the upstream.
@Suite struct ProxyConnectionInMemoryTests {
    @Test func getIsForwardedAndTheResponseRelayed() async throws {
        let harness = try InMemoryProxyHarness()
        let client = try harness.connect()
        client.send("GET /hello?x=1 HTTP/1.1\r\nHost: example.test\r\n\r\n")
        let upstream = try #require(await harness.upstream.accept())
        let request = try await upstream.readRequest()
        #expect(request.method == "GET")
        #expect(request.target == "/hello?x=1")
        #expect(request.header("Host") == "example.test")
        #expect(request.header("X-App-Attest-Status") == "skipped")
        #expect(request.header("X-Forwarded-For") == "198.51.100.7")

        upstream.send("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Upstream: yes\r\n\r\nhello")
        let response = try await client.readResponse()
        #expect(response.status == 200)
        #expect(response.bodyText == "hello")
        #expect(response.header("X-Upstream") == "yes")
        #expect(response.header("X-Request-Id") != nil)
        await harness.stop()
    }

    @Test func keepAliveServesTwoRequestsOverOneUpstreamConnection() async throws {
        let harness = try InMemoryProxyHarness()
        let client = try harness.connect()
        client.send("GET /first HTTP/1.1\r\nHost: t\r\n\r\n")
        let upstream = try #require(await harness.upstream.accept())
        #expect(try await upstream.readRequest().target == "/first")
        upstream.send("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none")
        #expect(try await client.readResponse().bodyText == "one")

        client.send("GET /second HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try await upstream.readRequest().target == "/second")
        upstream.send("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo")
        #expect(try await client.readResponse().bodyText == "two")
        #expect(harness.upstream.connectionCount == 1)
        #expect(!client.sawEndOfStream)
        #expect(harness.openConnections == 1)
        await harness.stop()
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        let harness = try InMemoryProxyHarness()
        let client = try harness.connect()
        client.send(
            "GET /p1 HTTP/1.1\r\nHost: t\r\n\r\n" + "POST /p2 HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc"
                + "HEAD /p3 HTTP/1.1\r\nHost: t\r\n\r\n")
        let upstream = try #require(await harness.upstream.accept())
        for (target, body) in [("/p1", ""), ("/p2", "abc"), ("/p3", "")] {
            let request = try await upstream.readRequest()
            #expect(request.target == target)
            #expect(request.bodyText == body)
            upstream.send(
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Target: \(target)\r\n\r\n" + (target == "/p3" ? "" : "ok"))
        }
        for (target, method) in [("/p1", "GET"), ("/p2", "POST"), ("/p3", "HEAD")] {
            let response = try await client.readResponse(to: method)
            #expect(response.status == 200)
            #expect(response.header("X-Target") == target)
            #expect(response.bodyText == (method == "HEAD" ? "" : "ok"))
        }
        #expect(harness.upstream.connectionCount == 1)
        await harness.stop()
    }

    @Test func aRequestTheGateRefusesIsAnsweredLocallyAndNeverReachesTheUpstream() async throws {
        let gate = PassthroughGate(
            routes: RouteTable(routes: [
                RoutePolicy(name: "api", match: .init(pathPrefix: "/api/"), upstream: InMemoryProxyHarness.upstreamName)
            ]))
        let harness = try InMemoryProxyHarness(gate: gate)
        let client = try harness.connect()
        client.send("GET /elsewhere HTTP/1.1\r\nHost: t\r\n\r\n")
        let response = try await client.readResponse()
        #expect(response.status == 404)
        #expect(response.header("Content-Type") == "application/json")
        #expect(response.bodyText.contains(#""error":"no_route""#))
        #expect(harness.upstream.connectionCount == 0)
        // The connection stays usable.
        client.send("GET /api/x HTTP/1.1\r\nHost: t\r\n\r\n")
        let upstream = try #require(await harness.upstream.accept())
        #expect(try await upstream.readRequest().target == "/api/x")
        upstream.send("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        #expect(try await client.readResponse().status == 200)
        await harness.stop()
    }

    @Test func contentLengthWithTransferEncodingIsRefusedWith400AndTheConnectionCloses() async throws {
        let harness = try InMemoryProxyHarness()
        let client = try harness.connect()
        client.send(
            "POST /smuggle HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "0\r\n\r\nGET /hidden HTTP/1.1\r\nHost: t\r\n\r\n")
        let response = try await client.readResponse(to: "POST")
        #expect(response.status == 400)
        #expect(response.bodyText.contains(#""error":"content_length_with_transfer_encoding""#))
        #expect(response.header("Connection") == "close")
        #expect(await client.waitForEndOfStream())
        #expect(client.received.isEmpty, "nothing after the refusal: the hidden request is never answered")
        #expect(harness.upstream.connectionCount == 0)
        // The proxy lingers, reading what the client still sends, until the client closes.
        client.close()
        #expect(
            await eventually(timeout: InMemoryHTTPPeer.patience, interval: .milliseconds(1)) { () async -> Bool in
                harness.openConnections == 0
            })
        await harness.stop()
    }

    @Test func aClientClosingMidBodyClosesTheUpstreamConnection() async throws {
        let harness = try InMemoryProxyHarness()
        let client = try harness.connect()
        let head = "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n"
        client.send(head + "0123456789")
        let upstream = try #require(await harness.upstream.accept())
        // The head went upstream (with the proxy's own headers) and the ten body bytes behind it.
        #expect(await upstream.waitForReceived(atLeast: head.utf8.count + 10))
        #expect(String(decoding: upstream.received, as: UTF8.self).hasSuffix("\r\n\r\n0123456789"))
        client.close()
        #expect(await upstream.waitForEndOfStream(), "the half-sent request must not stay open upstream")
        #expect(
            await eventually(timeout: InMemoryHTTPPeer.patience, interval: .milliseconds(1)) { () async -> Bool in
                harness.openConnections == 0
            })
        await harness.stop()
    }

    @Test func aChunkedUpstreamResponseIsRelayedChunked() async throws {
        let harness = try InMemoryProxyHarness()
        let client = try harness.connect()
        client.send("GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
        let upstream = try #require(await harness.upstream.accept())
        _ = try await upstream.readRequest()
        upstream.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        // The first chunk reaches the client before the upstream has finished.
        #expect(await client.waitForReceived(atLeast: 1))
        upstream.send("6\r\n world\r\n0\r\n\r\n")
        let response = try await client.readResponse()
        #expect(response.status == 200)
        #expect(response.wasChunked)
        #expect(response.bodyText == "hello world")

        client.send("GET /after HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try await upstream.readRequest().target == "/after")
        upstream.send("HTTP/1.1 204 No Content\r\n\r\n")
        #expect(try await client.readResponse().status == 204)
        await harness.stop()
    }

    /// Streams smaller than the response: the proxy's writes to the client block (with TLS,
    /// inside OpenSSL), it stops reading the upstream, and every byte still arrives (each
    /// wake-up is an edge; none is lost).
    @Test(arguments: [false, true])
    func aLargeResponseThroughSmallStreamsArrivesWhole(tls: Bool) async throws {
        let harness = try InMemoryProxyHarness(tls: tls, pipeCapacity: 16 * 1024)
        let client = try harness.connect()
        client.send("GET /large HTTP/1.1\r\nHost: localhost\r\n\r\n")
        #expect(await client.waitUntilSent())
        let upstream = try #require(await harness.upstream.accept())
        _ = try await upstream.readRequest()
        let body = (0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        upstream.send(Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body)
        let sent = await eventually(timeout: InMemoryHTTPPeer.patience, interval: .milliseconds(1)) {
            () async -> Bool in
            upstream.pump()
            client.pump()
            return upstream.hasSentEverything && client.received.count >= body.count
        }
        #expect(sent)
        let response = try await client.readResponse()
        #expect(response.status == 200)
        #expect(response.body == body)
        await harness.stop()
    }

    @Test func getOverTLSIsForwardedAndTheResponseRelayed() async throws {
        let harness = try InMemoryProxyHarness(tls: true)
        let client = try harness.connect()
        client.send("GET /secure HTTP/1.1\r\nHost: localhost\r\n\r\n")
        // Nothing moves the test's side but the test: the handshake runs inside this wait.
        #expect(await client.waitUntilSent())
        let upstream = try #require(await harness.upstream.accept())
        let request = try await upstream.readRequest()
        #expect(request.target == "/secure")
        #expect(request.header("X-Forwarded-Proto") == "https")

        upstream.send("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret")
        let response = try await client.readResponse()
        #expect(response.status == 200)
        #expect(response.bodyText == "secret")
        #expect(client.tls?.negotiatedProtocol == "TLSv1.3")
        #expect(client.tls?.negotiatedALPN == "http/1.1")

        client.send("GET /again HTTP/1.1\r\nHost: localhost\r\n\r\n")
        #expect(await client.waitUntilSent())
        #expect(try await upstream.readRequest().target == "/again")
        upstream.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(try await client.readResponse().bodyText == "ok")
        await harness.stop()
    }

    /// The readiness the loop waits on: readable while bytes or the end of the stream wait, quiet
    /// once drained (so an idle connection costs no wake-up), and every write or close after that
    /// makes it readable again (so none is missed).
    @Test func aStreamEndIsReadableExactlyWhileSomethingWaits() throws {
        let (proxy, test) = try InMemoryStreamEnd.pair()
        #expect(!Self.isReadable(proxy.fd))
        #expect(try Self.write("hello", to: test) == .processed(5))
        #expect(Self.isReadable(proxy.fd))

        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(try buffer.withUnsafeMutableBytes { try proxy.read(into: $0.baseAddress!, count: 2) } == .processed(2))
        #expect(!proxy.drained(afterReading: 2, of: 2))
        #expect(Self.isReadable(proxy.fd))
        #expect(try buffer.withUnsafeMutableBytes { try proxy.read(into: $0.baseAddress!, count: 16) } == .processed(3))
        #expect(proxy.drained(afterReading: 3, of: 16))
        #expect(!Self.isReadable(proxy.fd))
        #expect(try buffer.withUnsafeMutableBytes { try proxy.read(into: $0.baseAddress!, count: 16) } == .wouldBlock)

        // Bytes and the end of the stream together: not drained until the end is read.
        #expect(try Self.write("!", to: test) == .processed(1))
        test.shutdownOutput()
        #expect(try buffer.withUnsafeMutableBytes { try proxy.read(into: $0.baseAddress!, count: 16) } == .processed(1))
        #expect(!proxy.drained(afterReading: 1, of: 16))
        #expect(Self.isReadable(proxy.fd))
        #expect(try buffer.withUnsafeMutableBytes { try proxy.read(into: $0.baseAddress!, count: 16) } == .endOfFile)

        // The other direction still works; once the test's end closes, writing to it fails.
        #expect(try Self.write("back", to: proxy) == .processed(4))
        #expect(Self.isReadable(test.fd))
        test.close()
        #expect(throws: TransportError.self) { try Self.write("late", to: proxy) }
        proxy.close()
    }

    /// A full stream: the writer would block, and the reader making room signals it.
    @Test func aFullStreamBlocksItsWriterUntilTheReaderMakesRoom() throws {
        let (proxy, test) = try InMemoryStreamEnd.pair(capacity: 4)
        #expect(try Self.write("abcdef", to: proxy) == .processed(4))
        #expect(try Self.write("ef", to: proxy) == .wouldBlock)
        #expect(!Self.isReadable(proxy.fd))
        var buffer = [UInt8](repeating: 0, count: 2)
        #expect(try buffer.withUnsafeMutableBytes { try test.read(into: $0.baseAddress!, count: 2) } == .processed(2))
        #expect(Self.isReadable(proxy.fd), "the blocked writer gets an edge")
        #expect(try Self.write("ef", to: proxy) == .processed(2))
    }

    private static func write(_ text: String, to end: InMemoryStreamEnd) throws -> IOResult {
        let bytes = Array(text.utf8)
        return try bytes.withUnsafeBytes { try end.write($0.baseAddress!, count: $0.count) }
    }

    private static func isReadable(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 1 && entry.revents & Int16(POLLIN) != 0
    }
}
