import Dispatch
import Foundation
import GatewayTesting
import Glibc
import Synchronization
import Testing
import Verification

@testable import GateContract
@testable import GatewayIO
@testable import GatewayServe
@testable import HTTP1
@testable import HTTPProxy
@testable import PolicyModel

/// The proxy end to end on loopback: a real upstream (`scripts/upstream.py`), the server
/// in-process, blocking test clients. Each test is bounded to a few seconds.
@Suite(.serialized) struct ProxyIntegrationTests {
    @Test func keepAliveIsReusedOnBothSides() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, accessLog: true)
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        var upstreamConnections = Set<Int>()
        var lastCount = 0
        for i in 1...5 {
            try client.send("GET /k/\(i) HTTP/1.1\r\nHost: test\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 200)
            let echo = try response.json()
            #expect(echo["target"] as? String == "/k/\(i)")
            upstreamConnections.insert(try #require(echo["connection"] as? Int))
            lastCount = try #require(echo["request_on_connection"] as? Int)
        }
        #expect(upstreamConnections.count == 1)
        #expect(lastCount == 5)
        #expect(try upstream.stats().connections == 2)  // the proxy's one + this stats request
        #expect(gateway.server.openConnections == 1)
        // accessLogLines() consumes what it reads: lines are handed over per tick (100 ms),
        // so the five may arrive over several reads.
        var lines: [String] = []
        let logged = eventually {
            lines += gateway.accessLogLines()
            return lines.count >= 5
        }
        #expect(logged)
    }

    @Test func accessLogRecordsRouteStatusAndVerdict() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], accessLog: true)
        defer { gateway.stop() }
        _ = try TestHTTPClient.request(port: gateway.port, "GET /logged?status=201 HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(eventually { !gateway.accessLogLines().isEmpty })
        let lines = gateway.accessLogLines()
        let entry = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(entry["method"] as? String == "GET")
        #expect(entry["path"] as? String == "/logged")
        #expect(entry["route"] as? String == "all")
        #expect(entry["status"] as? Int == 201)
        #expect(entry["verdict"] as? String == "skipped")
        #expect(entry["upstream_ms"] is Double)
        #expect(entry["total_ms"] is Double)
        #expect(gateway.metrics.render().contains("attest_gateway_requests_total{route=\"all\",status=\"2xx\"} 1"))
    }

    @Test func chunkedRequestAndResponseBodiesStreamThrough() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration])
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        let pieces = ["hello ", String(repeating: "x", count: 70_000), " world"]
        var request = "POST /chunks?chunked=1 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
        for piece in pieces {
            request += String(piece.utf8.count, radix: 16) + "\r\n" + piece + "\r\n"
        }
        request += "0\r\nX-Trailer: yes\r\n\r\n"
        try client.send(request)
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.headers["Transfer-Encoding"] == "chunked")
        let echo = try response.json()
        let body = Array(pieces.joined().utf8)
        #expect(echo["body_bytes"] as? Int == body.count)
        #expect(echo["body_sha256"] as? String == SHA256.hash(body).hexString)
        let forwarded = try response.echoedHeaders()
        #expect(forwarded.contains { $0.0 == "Transfer-Encoding" && $0.1 == "chunked" })
        #expect(!forwarded.contains { $0.0 == "Content-Length" })

        // A close-delimited upstream body reaches an HTTP/1.1 client chunked, on a kept connection.
        try client.send("GET /close?close=1&size=100000 HTTP/1.1\r\nHost: t\r\n\r\n")
        let closeDelimited = try client.readResponse()
        #expect(closeDelimited.status == 200)
        #expect(closeDelimited.headers["Transfer-Encoding"] == "chunked")
        #expect(closeDelimited.body.count == 100_000)
        #expect(closeDelimited.headers["X-Body-SHA256"] == SHA256.hash(closeDelimited.body).hexString)
        try client.send("GET /after HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try client.readResponse().status == 200)
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration])
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        try client.send(
            "GET /p1 HTTP/1.1\r\nHost: t\r\n\r\n" + "GET /p2?delay=200 HTTP/1.1\r\nHost: t\r\n\r\n"
                + "POST /p3 HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc"
                + "HEAD /p4 HTTP/1.1\r\nHost: t\r\n\r\n"
                + "GET /p5 HTTP/1.1\r\nHost: t\r\n\r\n")
        for (target, method) in [
            ("/p1", "GET"), ("/p2?delay=200", "GET"), ("/p3", "POST"), ("/p4", "HEAD"), ("/p5", "GET"),
        ] {
            let response = try client.readResponse(method: method)
            #expect(response.status == 200)
            if method == "HEAD" {
                #expect(response.body.isEmpty)
                #expect(response.headers["Content-Length"] != nil)
            } else {
                #expect(try response.json()["target"] as? String == target)
            }
        }
    }

    @Test func hundredMegabytesStreamBothWaysWithBoundedMemory() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration])
        defer { gateway.stop() }
        let size = 100_000_000
        let peakBefore = Self.peakRSSKilobytes()

        // Upload: the client sends 100 MB (byte i = i & 0xFF) from one reused 64 KiB buffer.
        let block = (0..<65_536).map { UInt8($0 & 0xFF) }
        let client = try TestHTTPClient(port: gateway.port, timeoutSeconds: 60)
        try client.send("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: \(size)\r\n\r\n")
        var sent = 0
        try block.withUnsafeBytes { raw in
            while sent < size {
                let count = min(raw.count, size - sent)
                try client.send(UnsafeRawBufferPointer(rebasing: raw[0..<count]))
                sent += count
            }
        }
        let upload = try client.readResponse()
        #expect(upload.status == 200)
        let echo = try upload.json()
        #expect(echo["body_bytes"] as? Int == size)
        #expect(echo["body_sha256"] as? String == (try Self.patternDigest(size)))

        // Download: 100 MB from the upstream, checked byte by byte as it arrives, not kept.
        try client.send("GET /download?size=\(size) HTTP/1.1\r\nHost: t\r\n\r\n")
        var received = 0
        var mismatches = 0
        let download = try client.readResponse { bytes in
            for byte in bytes {
                if byte != UInt8(received & 0xFF) { mismatches += 1 }
                received += 1
            }
        }
        #expect(download.status == 200)
        #expect(received == size)
        #expect(mismatches == 0)
        let growthMB = (Self.peakRSSKilobytes() - peakBefore) / 1024
        // The proxy holds at most its high-water marks (256 KiB per direction) plus buffers.
        #expect(growthMB < 48, "peak RSS grew by \(growthMB) MB while 200 MB streamed through")
    }

    @Test func halfClosedClientStillReceivesTheWholeResponse() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration])
        defer { gateway.stop() }
        // A small receive window and a slow reader: when the upstream's response is complete,
        // its tail still waits in the gateway's output, and the half-close is read then.
        let client = try TestHTTPClient(port: gateway.port, receiveBufferBytes: 4096)
        try client.send("GET /half?size=8000000 HTTP/1.1\r\nHost: t\r\n\r\n")
        client.shutdownWrite()
        var received = 0
        let response = try client.readResponse { bytes in
            received += bytes.count
            usleep(200)
        }
        #expect(response.status == 200)
        #expect(received == 8_000_000)
        #expect(client.waitForClose())
    }

    @Test func upstreamDownAnswers502AndKeepsTheClient() throws {
        let closedPort = try Self.unusedPort()
        let gateway = try TestGateway(
            upstreams: ["api": UpstreamConfiguration(name: "api", host: "127.0.0.1", port: closedPort)])
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        for _ in 0..<2 {
            try client.send("GET /down HTTP/1.1\r\nHost: t\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 502)
            #expect(response.headers["Content-Type"] == "application/json")
            #expect(try response.json()["error"] as? String == "upstream_unavailable")
        }
        #expect(
            gateway.metrics.render().contains(
                "attest_gateway_upstream_errors_total{upstream=\"api\",kind=\"unavailable\"} 2"))
    }

    @Test func upstreamResetAnswers502() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration])
        defer { gateway.stop() }
        let response = try TestHTTPClient.request(
            port: gateway.port, "POST /r?reset=1 HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", method: "POST")
        #expect(response.status == 502)
        #expect(try response.json()["error"] as? String == "upstream_unavailable")
    }

    @Test func slowUpstreamAnswers504() throws {
        let upstream = try UpstreamProcess()
        var configuration = upstream.configuration
        configuration.responseTimeout = .milliseconds(400)
        let gateway = try TestGateway(upstreams: ["api": configuration])
        defer { gateway.stop() }
        let started = Date()
        let response = try TestHTTPClient.request(
            port: gateway.port, "GET /slow?delay=4000 HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(response.status == 504)
        #expect(try response.json()["error"] as? String == "upstream_timeout")
        // Answered by the timeout, well before the upstream would have answered.
        #expect(Date().timeIntervalSince(started) < 3.5)
        #expect(
            gateway.metrics.render().contains(
                "attest_gateway_upstream_errors_total{upstream=\"api\",kind=\"timeout\"} 1"))
    }

    /// After a request read to its end the client has nothing more to send: the gateway closes
    /// at once (as nginx), not after the client's FIN or the 2 s linger deadline.
    @Test func aConnectionCloseExchangeClosesWithoutWaitingForTheClient() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1)
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        try client.send("GET /close HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        #expect(try client.readResponse().status == 200)
        // The client keeps its socket open and sends no FIN.
        let started = ContinuousClock.now
        #expect(eventually { gateway.server.openConnections == 0 })
        #expect(ContinuousClock.now - started < .seconds(1))
        // A FIN, not a reset: the close found the receive queue empty.
        var byte: UInt8 = 0
        #expect(recv(client.fd, &byte, 1, 0) == 0)
    }

    /// When the client may still be sending (here: a request that could not be parsed), the
    /// gateway half-closes and lingers, so that the client reads the answer, not a reset.
    @Test func anUnreadRequestIsAnsweredThenLingers() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1)
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        try client.send("NOT HTTP AT ALL\r\n\r\n")
        #expect(try client.readResponse().status == 400)
        Thread.sleep(forTimeInterval: 0.3)
        #expect(gateway.server.openConnections == 1)
        client.shutdownWrite()
        #expect(eventually { gateway.server.openConnections == 0 })
    }

    @Test func clientGoneMidBodyReleasesTheUpstreamConnection() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration])
        defer { gateway.stop() }
        do {
            let client = try TestHTTPClient(port: gateway.port)
            try client.send("POST /partial HTTP/1.1\r\nHost: t\r\nContent-Length: 10000000\r\n\r\n")
            try client.send([UInt8](repeating: 7, count: 1_000_000))
            // Wait until the upstream has the connection, then vanish mid-body.
            #expect(try eventually { try upstream.stats().open >= 2 })
        }
        // The gateway closes its upstream connection (not pooled), so the upstream's handler ends;
        // only the stats request's own connection stays open.
        #expect(try eventually { try upstream.stats().open == 1 })
        #expect(eventually { gateway.server.openConnections == 0 })
    }

    @Test func slowlorisHeadGets408() throws {
        let upstream = try UpstreamProcess()
        var limits = GatewayLimits()
        limits.headerReadTimeout = .milliseconds(300)
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], limits: limits)
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        try client.send("GET /slow HTTP/1.1\r\nHost: t\r\n")
        usleep(100_000)
        try client.send("X-Dribble: 1\r\n")  // trickling bytes do not extend the head's deadline
        let response = try client.readResponse()
        #expect(response.status == 408)
        #expect(response.headers["Connection"] == "close")
        #expect(client.waitForClose())
    }

    @Test func maxConnectionsClosesExtraConnectionsAtAccept() throws {
        let upstream = try UpstreamProcess()
        var limits = GatewayLimits()
        limits.maxConnections = 2
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], limits: limits)
        defer { gateway.stop() }
        let first = try TestHTTPClient(port: gateway.port)
        let second = try TestHTTPClient(port: gateway.port)
        try first.send("GET /a HTTP/1.1\r\nHost: t\r\n\r\n")
        try second.send("GET /b HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try first.readResponse().status == 200)
        #expect(try second.readResponse().status == 200)
        let third = try TestHTTPClient(port: gateway.port)
        #expect(third.waitForClose())
        #expect(gateway.metrics.render().contains("attest_gateway_connections_rejected_total 1"))
    }

    @Test func ipv4AndIPv6ListenersServeTheSameRoutes() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration])
        defer { gateway.stop() }
        let v6 = try gateway.server.listen(
            on: ListenAddress(host: "::1", port: 0), name: "main",
            gate: PassthroughGate(
                routes: RouteTable(routes: [
                    RoutePolicy(name: "all", match: .init(pathPrefix: "/"), upstream: "api")
                ])))
        #expect(v6.family == AF_INET6)
        let response = try TestHTTPClient.request(
            port: v6.port, host: "::1", "GET /over-v6 HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(response.status == 200)
        let forwarded = try response.echoedHeaders()
        #expect(forwarded.contains { $0.0 == "X-Forwarded-For" && $0.1 == "::1" })
        #expect(forwarded.contains { $0.0 == "Forwarded" && $0.1.hasPrefix("for=\"[::1]\"") })
        let v4 = try TestHTTPClient.request(port: gateway.port, "GET /over-v4 HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(v4.status == 200)
    }

    @Test func requestsWaitForABusyPoolInsteadOfOpeningMoreConnections() throws {
        let upstream = try UpstreamProcess()
        var configuration = upstream.configuration
        configuration.maxConnections = 1
        let gateway = try TestGateway(upstreams: ["api": configuration], loops: 1)
        defer { gateway.stop() }
        var clients: [TestHTTPClient] = []
        for i in 0..<3 {
            let client = try TestHTTPClient(port: gateway.port)
            try client.send("GET /queued\(i)?delay=150 HTTP/1.1\r\nHost: t\r\n\r\n")
            clients.append(client)
        }
        var seenConnections = Set<Int>()
        for (i, client) in clients.enumerated() {
            let response = try client.readResponse()
            #expect(response.status == 200)
            let echo = try response.json()
            #expect(echo["target"] as? String == "/queued\(i)?delay=150")
            seenConnections.insert(try #require(echo["connection"] as? Int))
        }
        #expect(seenConnections.count == 1)
    }

    @Test func reloadSwapsRoutesAndUpstreamsAndKeepsThePolicyWhenTheFileIsBad() throws {
        let first = try UpstreamProcess()
        let second = try UpstreamProcess()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("proxy-reload-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("policy.yaml").path
        func writePolicy(upstreamPort: UInt16, prefix: String) throws {
            try """
            listen: 127.0.0.1:\(try Self.unusedPort())
            store: memory
            upstreams:
              api: { url: "http://127.0.0.1:\(upstreamPort)", max_connections: 4 }
            routes:
              - name: only
                match: { path_prefix: \(prefix) }
                upstream: api
                mode: off
            """.write(toFile: path, atomically: true, encoding: .utf8)
        }
        try writePolicy(upstreamPort: first.port, prefix: "/a")
        let server = try GatewayServer(loopCount: 1, accessLog: nil)
        let service = GatewayService(
            configPath: path, server: server, load: { try PolicyLoader.load(path: $0) },
            makeGates: { policy, _ in GatewayGates(main: PassthroughGate(policy: policy), admin: nil) })
        let bound = try service.start()
        defer {
            let done = DispatchSemaphore(value: 0)
            server.shutdown(drainTimeout: .seconds(1)) { _ in done.signal() }
            done.wait()
        }
        let port = try #require(bound.first).address.port
        #expect(try TestHTTPClient.request(port: port, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n").status == 200)
        #expect(try TestHTTPClient.request(port: port, "GET /b HTTP/1.1\r\nHost: t\r\n\r\n").status == 404)

        try writePolicy(upstreamPort: second.port, prefix: "/b")
        service.reload()
        #expect(try TestHTTPClient.request(port: port, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n").status == 404)
        #expect(try TestHTTPClient.request(port: port, "GET /b HTTP/1.1\r\nHost: t\r\n\r\n").status == 200)
        #expect(try second.stats().requests == 1)
        #expect(try first.stats().requests == 1)

        try "routes: [ this is not a policy".write(toFile: path, atomically: true, encoding: .utf8)
        service.reload()
        #expect(try TestHTTPClient.request(port: port, "GET /b HTTP/1.1\r\nHost: t\r\n\r\n").status == 200)
        #expect(try second.stats().requests == 2)
    }

    // MARK: - Gates

    @Test func bufferingGateSeesTheBodyAndContinueIsAnswered() throws {
        let upstream = try UpstreamProcess()
        let gate = BufferingTestGate(cap: 1000)
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], gate: gate)
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        let body = String(repeating: "b", count: 500)
        try client.send("POST /buffered HTTP/1.1\r\nHost: t\r\nContent-Length: 500\r\nExpect: 100-continue\r\n\r\n")
        // The client waits for 100 Continue before sending the body.
        try client.send(body)
        let response = try client.readResponse(method: "POST")
        #expect(response.informational == [100])
        #expect(response.status == 200)
        let echo = try response.json()
        #expect(echo["body_bytes"] as? Int == 500)
        let forwarded = try response.echoedHeaders()
        #expect(forwarded.contains { $0.0 == "X-Gate-Body-Bytes" && $0.1 == "500" })
        #expect(!forwarded.contains { $0.0.lowercased() == "expect" })

        // Beyond the cap: 413 before any body byte is read, then the connection closes.
        let big = try TestHTTPClient(port: gateway.port)
        try big.send("POST /buffered HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n")
        let tooLarge = try big.readResponse(method: "POST")
        #expect(tooLarge.status == 413)
        #expect(tooLarge.informational.isEmpty)
        #expect(try tooLarge.json()["error"] as? String == "body_too_large")
        #expect(big.waitForClose())

        // A chunked body that grows past the cap.
        let chunked = try TestHTTPClient(port: gateway.port)
        let piece = String(repeating: "c", count: 800)
        try chunked.send(
            "POST /buffered HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n320\r\n\(piece)\r\n320\r\n\(piece)\r\n0\r\n\r\n"
        )
        #expect(try chunked.readResponse(method: "POST").status == 413)
    }

    @Test func gateCanBeSwappedAtRuntime() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration])
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        try client.send("GET /swap HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try client.readResponse().status == 200)
        gateway.server.update { $0.gates["main"] = DenyingTestGate() }
        try client.send("GET /swap HTTP/1.1\r\nHost: t\r\n\r\n")
        let denied = try client.readResponse()
        #expect(denied.status == 403)
        #expect(try denied.json()["error"] as? String == "denied_by_test")
        // The connection stays usable after a local answer.
        try client.send("GET /swap HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try client.readResponse().status == 403)
    }

    @Test func invalidRequestGets400AndClose() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration])
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        try client.send("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.status == 400)
        #expect(response.headers["Connection"] == "close")
        #expect(client.waitForClose())
        #expect(try upstream.stats().requests == 0)
    }

    // MARK: - Shutdown

    /// A connection accepted before the drain began but started on its loop after it (the
    /// accepting loop hands it over) used to be closed unread: its request, already in the
    /// socket, met a reset. Loop 1 is held while two connections are accepted, so the one it
    /// is given starts only after `shutdown`.
    @Test func aConnectionStartedAfterTheDrainBeganIsAnsweredNotReset() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 2)
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        gateway.server.group.loops[1].execute {
            held.signal()
            release.wait()
        }
        held.wait()
        var clients: [TestHTTPClient] = []
        for index in 0..<2 {
            let client = try TestHTTPClient(port: gateway.port)
            try client.send("GET /late\(index) HTTP/1.1\r\nHost: t\r\n\r\n")
            clients.append(client)
        }
        // Both accepted and counted (round-robin: one of them waits for loop 1).
        #expect(eventually { gateway.server.openConnections == 2 })
        let drained = Mutex<Bool?>(nil)
        gateway.server.shutdown(drainTimeout: .seconds(5)) { ok in drained.withLock { $0 = ok } }
        #expect(gateway.server.isDraining)
        release.signal()
        for (index, client) in clients.enumerated() {
            let response = try client.readResponse()
            #expect(response.status == 200, "client \(index)")
            #expect(try response.json()["target"] as? String == "/late\(index)")
        }
        #expect(eventually { drained.withLock { $0 } == true })
    }

    @Test func shutdownLetsInFlightRequestsFinishAndClosesIdleConnections() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration])
        let idle = try TestHTTPClient(port: gateway.port)
        try idle.send("GET /idle HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try idle.readResponse().status == 200)

        var busy: [TestHTTPClient] = []
        for i in 0..<4 {
            let client = try TestHTTPClient(port: gateway.port)
            try client.send("GET /busy\(i)?delay=600 HTTP/1.1\r\nHost: t\r\n\r\n")
            busy.append(client)
        }
        #expect(try eventually { try upstream.stats().requests >= 5 })
        let drained = Mutex<Bool?>(nil)
        gateway.server.shutdown(drainTimeout: .seconds(5)) { ok in drained.withLock { $0 = ok } }
        #expect(idle.waitForClose())
        for (i, client) in busy.enumerated() {
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.headers["Connection"] == "close")
            #expect(try response.json()["target"] as? String == "/busy\(i)?delay=600")
        }
        #expect(eventually { drained.withLock { $0 } == true })
        #expect(throws: (any Error).self) { _ = try TestHTTPClient(port: gateway.port) }
    }

    @Test func sigtermToTheBinaryDrainsInFlightRequestsAndExitsZero() throws {
        let upstream = try UpstreamProcess()
        let binary = try Self.gatewayBinary()
        let listenPort = try Self.unusedPort()
        let (directory, policy) = try Self.temporaryPolicy(
            "proxy-sigterm",
            """
            listen: 127.0.0.1:\(listenPort)
            store: memory
            app_ids: ["ABCDE12345.com.example.app"]
            limits:
              shutdown_drain_timeout: 5s
            upstreams:
              api: { url: "http://127.0.0.1:\(upstream.port)", max_connections: 8 }
            routes:
              - match: { path_prefix: / }
                upstream: api
                mode: off
            """)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (process, stderr) = Self.serveProcess(binary: binary, policy: policy)
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let port = try Self.readListeningPort(stderr.fileHandleForReading)
        #expect(port == listenPort)

        var clients: [TestHTTPClient] = []
        for i in 0..<5 {
            let client = try TestHTTPClient(port: port)
            try client.send("GET /inflight\(i)?delay=700 HTTP/1.1\r\nHost: t\r\n\r\n")
            clients.append(client)
        }
        #expect(try eventually { try upstream.stats().requests >= 5 })
        kill(process.processIdentifier, SIGTERM)
        for (i, client) in clients.enumerated() {
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(try response.json()["target"] as? String == "/inflight\(i)?delay=700")
        }
        #expect(eventually(timeout: .seconds(5)) { !process.isRunning })
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
    }

    // MARK: - Helpers

    static func peakRSSKilobytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0") ?? 0
        }
        return 0
    }

    /// SHA-256 (hex) of `size` bytes where byte i = i & 0xFF, computed by python3 (no 100 MB in this process).
    static func patternDigest(_ size: Int) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            "import hashlib,sys; n=int(sys.argv[1]); h=hashlib.sha256(); b=bytes(range(256))*256\nwhile n>0:\n h.update(b[:min(n,len(b))]); n-=min(n,len(b))\nprint(h.hexdigest())",
            String(size),
        ]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A loopback port with nothing listening on it.
    static func unusedPort() throws -> UInt16 {
        let fd = try SystemCalls.listen(on: try #require(SocketAddress(ipLiteral: "127.0.0.1", port: 0)))
        let port = try #require(SystemCalls.localAddress(fd)).port
        close(fd)
        return port
    }

    /// The `attest-gateway` executable built beside this test bundle.
    /// Writes `text` to `policy.yaml` in a fresh temporary directory named after `name`; the
    /// caller removes `directory` when done.
    static func temporaryPolicy(_ name: String, _ text: String) throws -> (directory: URL, policy: URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let policy = directory.appendingPathComponent("policy.yaml")
        try text.write(to: policy, atomically: true, encoding: .utf8)
        return (directory, policy)
    }

    /// `attest-gateway serve --config POLICY --no-access-log`, not started yet; its stderr (the
    /// operational log) is the returned pipe.
    static func serveProcess(binary: String, policy: URL) -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve", "--config", policy.path, "--no-access-log"]
        let stderr = Pipe()
        process.standardError = stderr
        process.standardOutput = FileHandle.nullDevice
        return (process, stderr)
    }

    static func gatewayBinary() throws -> String {
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = bundle.deletingLastPathComponent()
        for _ in 0..<3 {
            let candidate = directory.appendingPathComponent("attest-gateway").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        throw TestFailure("attest-gateway binary not found near \(bundle.path): run `swift build --build-tests` first")
    }

    /// Reads the serve command's stderr until its `listening` line; returns the port.
    static func readListeningPort(_ handle: FileHandle) throws -> UInt16 {
        var line: [UInt8] = []
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let byte = handle.readData(ofLength: 1)
            if byte.isEmpty { break }
            if byte[0] == UInt8(ascii: "\n") {
                let text = String(decoding: line, as: UTF8.self)
                if text.contains("\"listening\""), let range = text.range(of: "\"address\":\"127.0.0.1:") {
                    let digits = text[range.upperBound...].prefix { $0.isNumber }
                    if let port = UInt16(digits) { return port }
                }
                line.removeAll()
            } else {
                line.append(byte[0])
            }
        }
        throw TestFailure("the gateway did not log its listening address")
    }
}

/// Buffers bodies up to `cap`, decides on another queue, and forwards with the body size it saw.
struct BufferingTestGate: RequestGate {
    let cap: Int

    func classify(_ head: HTTPRequestHead, client: String) -> GateClassification {
        GateClassification(routeName: "buffered", upstream: "api", bufferBodyUpTo: self.cap)
    }

    func decide(
        _ head: HTTPRequestHead, body: [UInt8]?, classification: GateClassification,
        promise: GateDecisionPromise
    ) {
        DispatchQueue.global().async {
            var forwarded = head
            forwarded.headers.add(name: "X-Gate-Body-Bytes", value: String(body?.count ?? -1))
            promise.succeed(.forward(forwarded, GateLogInfo(verdict: .verified, keyID: "testkey1")))
        }
    }
}

/// Answers every request locally with 403.
struct DenyingTestGate: RequestGate {
    func classify(_ head: HTTPRequestHead, client: String) -> GateClassification {
        GateClassification(routeName: "denied", upstream: "api", bufferBodyUpTo: nil)
    }

    func decide(
        _ head: HTTPRequestHead, body: [UInt8]?, classification: GateClassification,
        promise: GateDecisionPromise
    ) {
        promise.succeed(
            .respond(
                .jsonError(status: 403, code: "denied_by_test", message: "no"),
                GateLogInfo(verdict: .invalidSignature)))
    }
}
