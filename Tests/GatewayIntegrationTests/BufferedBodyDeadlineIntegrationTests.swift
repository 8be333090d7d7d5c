import Dispatch
import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import GateContract
@testable import GatewayIO
@testable import HTTP1
@testable import HTTPProxy
@testable import PolicyModel

/// On loopback: a buffered body trickled past a short total deadline gets 408 and gives its
/// share of the body budget back, while steady bodies and streamed trickles pass. Bounded to
/// a few seconds; the trickles send a byte every 150 ms so that the idle timer never fires.
@Suite(.serialized) struct BufferedBodyDeadlineIntegrationTests {
    static let deadline = Duration.seconds(1)

    /// Buffers bodies (route `buffered`) except under `/stream` (route `streamed`).
    struct SplitGate: RequestGate {
        func classify(_ head: HTTPRequestHead, client: String) -> GateClassification {
            if head.path.hasPrefix("/stream") {
                return GateClassification(routeName: "streamed", upstream: "api", bufferBodyUpTo: nil)
            }
            return GateClassification(routeName: "buffered", upstream: "api", bufferBodyUpTo: 1 << 20)
        }

        func decide(
            _ head: HTTPRequestHead, body: [UInt8]?, classification: GateClassification,
            promise: GateDecisionPromise
        ) {
            promise.succeed(.forward(head, GateLogInfo(verdict: .verified)))
        }
    }

    private static func timeouts(_ gateway: TestGateway, route: String) -> Int? {
        let prefix = "attest_gateway_buffered_body_timeouts_total{route=\"\(route)\"} "
        for line in gateway.metrics.render().split(separator: "\n") where line.hasPrefix(prefix) {
            return Int(line.dropFirst(prefix.count))
        }
        return nil
    }

    /// Whether the client's socket has something to read (a response, or EOF) now.
    private static func readable(_ client: TestHTTPClient) -> Bool {
        var entry = pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) > 0
    }

    /// Sends `piece(i)` to client `i` every `intervalMilliseconds` until it has something to
    /// read (then `answeredAt[i]` is set), has had `counts[i]` pieces, or `seconds` pass.
    private static func trickle(
        _ clients: [TestHTTPClient], counts: [Int], intervalMilliseconds: UInt32, seconds: Double,
        piece: (Int) -> String
    ) -> (sent: [Int], answeredAt: [Date?]) {
        var sent = [Int](repeating: 0, count: clients.count)
        var answeredAt = [Date?](repeating: nil, count: clients.count)
        var done = [Bool](repeating: false, count: clients.count)
        let end = Date().addingTimeInterval(seconds)
        while Date() < end && done.contains(false) {
            for (index, client) in clients.enumerated() where !done[index] {
                if Self.readable(client) {
                    answeredAt[index] = Date()
                    done[index] = true
                    continue
                }
                if sent[index] == counts[index] {
                    done[index] = true
                    continue
                }
                do {
                    try client.send(piece(index))
                    sent[index] += 1
                } catch {
                    done[index] = true
                }
            }
            usleep(intervalMilliseconds * 1000)
        }
        return (sent, answeredAt)
    }

    @Test func trickledBuffersGet408WhileSteadyBodiesAndStreamsPass() throws {
        let upstream = try UpstreamProcess()
        var limits = GatewayLimits()
        limits.bufferedBodyTimeout = Self.deadline
        limits.bodyReadIdleTimeout = .seconds(10)
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], gate: SplitGate(), limits: limits)
        defer { gateway.stop() }

        let declared = 1_000
        let start = Date()
        let slowLength = try TestHTTPClient(port: gateway.port)
        try slowLength.send("POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: \(declared)\r\n\r\n")
        let slowChunked = try TestHTTPClient(port: gateway.port)
        try slowChunked.send("POST /slow-chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        let slowStream = try TestHTTPClient(port: gateway.port)
        // Streamed: 12 bytes over ~1.8 s, past the buffered deadline; only the idle timer applies.
        try slowStream.send("POST /stream HTTP/1.1\r\nHost: t\r\nContent-Length: 12\r\n\r\n")
        #expect(eventually { gateway.server.bodyBudget.inUse == declared })

        // A steady client on the buffered route: 40 KB in 4 pieces within ~0.3 s passes.
        let steady = try TestHTTPClient(port: gateway.port)
        let body = [UInt8](repeating: UInt8(ascii: "s"), count: 40_000)
        try steady.send("POST /steady HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.count)\r\n\r\n")
        for index in 0..<4 {
            try steady.send(Array(body[(index * 10_000)..<((index + 1) * 10_000)]))
            usleep(100_000)
        }
        let passed = try steady.readResponse()
        #expect(passed.status == 200)
        #expect(try passed.json()["body_bytes"] as? Int == body.count)

        // Up to 6 s of trickling for the buffered bodies: the 408 must cut them short.
        let (sent, answeredAt) = Self.trickle(
            [slowLength, slowChunked, slowStream], counts: [40, 40, 12], intervalMilliseconds: 150, seconds: 8
        ) { index in index == 1 ? "1\r\nc\r\n" : "x" }
        #expect(sent[2] == 12, "the streamed body was cut short after \(sent[2]) bytes")
        let streamed = try slowStream.readResponse()
        #expect(streamed.status == 200)
        #expect(try streamed.json()["body_bytes"] as? Int == 12)
        // The stream lived well past the buffered deadline.
        #expect(Date().timeIntervalSince(start) > 1.5)

        for (index, client) in [slowLength, slowChunked].enumerated() {
            let response = try client.readResponse()
            #expect(response.status == 408)
            #expect(try response.json()["error"] as? String == "request_timeout")
            #expect(response.headers["Connection"] == "close")
            #expect(client.waitForClose())
            // Not before the deadline (counted from the head, sent after `start`), and while the
            // trickle was still going: a byte every 150 ms keeps the 10 s idle timer from firing.
            let answered = try #require(answeredAt[index], "no answer while trickling")
            #expect(answered.timeIntervalSince(start) >= 1.0)
            #expect(sent[index] > 0 && sent[index] < 40, "\(sent[index]) pieces before the 408")
        }
        #expect(eventually { gateway.server.bodyBudget.inUse == 0 })
        #expect(gateway.metrics.render().contains("attest_gateway_buffered_body_bytes 0"))
        #expect(Self.timeouts(gateway, route: "buffered") == 2)
        #expect(Self.timeouts(gateway, route: "streamed") == nil)

        // The steady connection is kept; its next body gets a deadline of its own (the first
        // head was more than a deadline ago).
        try steady.send("POST /again HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.count)\r\n\r\n")
        try steady.send(body)
        #expect(try steady.readResponse().status == 200)
        #expect(eventually { gateway.server.bodyBudget.inUse == 0 })
        #expect(Self.timeouts(gateway, route: "buffered") == 2)
    }

    /// The built binary: the policy key reaches the proxy, and the log names the route and
    /// how much of the body had arrived of how much.
    @Test func binaryAnswers408AndLogsTheRouteAndBytes() throws {
        let binary = try ProxyIntegrationTests.gatewayBinary()
        let upstream = try UpstreamProcess()
        let (directory, policy) = try ProxyIntegrationTests.temporaryPolicy(
            "body-deadline",
            """
            listen: 127.0.0.1:\(try ProxyIntegrationTests.unusedPort())
            store: memory
            app_ids: ["ABCDE12345.com.example.app"]
            limits: { buffered_body_timeout: 1s }
            upstreams: { api: { url: "http://127.0.0.1:\(upstream.port)" } }
            routes:
              - { name: uploads, match: { path_prefix: / }, upstream: api, mode: enforce }
            """)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (process, stderr) = ProxyIntegrationTests.serveProcess(binary: binary, policy: policy)
        try process.run()
        defer { BodyBudgetIntegrationTests.stop(process) }
        let (log, listening) = try BodyBudgetIntegrationTests.waitForListening(stderr)

        let client = try TestHTTPClient(port: listening)
        try client.send(
            "POST /v1/upload HTTP/1.1\r\nHost: t\r\nX-App-Attest-Key-Id: BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\r\nX-App-Assertion: AA==\r\nContent-Length: 5000\r\n\r\n"
        )
        let (sent, _) = Self.trickle([client], counts: [40], intervalMilliseconds: 150, seconds: 8) { _ in "abc" }
        let response = try client.readResponse()
        #expect(response.status == 408)
        #expect(try response.json()["error"] as? String == "request_timeout")
        #expect(sent[0] > 0 && sent[0] < 40)
        // The last piece may have crossed the 408 (discarded while the connection lingers).
        let received = [sent[0] * 3, (sent[0] - 1) * 3]
        #expect(
            log.wait { lines in
                lines.contains { line in
                    line.contains("\"event\":\"buffered_body_timeout\"") && line.contains("\"route\":\"uploads\"")
                        && received.contains { line.contains("\"body_bytes_received\":\"\($0)\"") }
                        && line.contains("\"body_bytes_declared\":\"5000\"")
                        && line.contains("\"buffered_body_timeout\":\"1s\"")
                }
            }, "\(log.lines)")
    }
}
