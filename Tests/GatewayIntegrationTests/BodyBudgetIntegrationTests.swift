import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import GatewayIO
@testable import HTTP1
@testable import HTTPProxy

/// The process-wide buffered-body budget and HEAD answers, on loopback: a real upstream
/// (`scripts/upstream.py`), the server in-process, blocking clients. Budgets are tiny so that
/// two bodies of 60 KB cannot both be held. Each test is bounded to a few seconds.
@Suite(.serialized) struct BodyBudgetIntegrationTests {
    static let budget = 100_000
    static let bodySize = 60_000

    private func gateway(_ upstream: UpstreamProcess) throws -> TestGateway {
        var limits = GatewayLimits()
        limits.maxBufferedBodyBytes = Self.budget
        return try TestGateway(
            upstreams: ["api": upstream.configuration], gate: BufferingTestGate(cap: 1 << 20), limits: limits)
    }

    private func rejections(_ gateway: TestGateway) -> Int {
        let prefix = "attest_gateway_body_budget_rejections_total "
        for line in gateway.metrics.render().split(separator: "\n") where line.hasPrefix(prefix) {
            return Int(line.dropFirst(prefix.count)) ?? -1
        }
        return -1
    }

    @Test func secondLargeBodyGets503UntilTheFirstFinishes() throws {
        let upstream = try UpstreamProcess()
        let gateway = try self.gateway(upstream)
        defer { gateway.stop() }
        let body = [UInt8](repeating: UInt8(ascii: "a"), count: Self.bodySize)

        // The first client declares its body and sends half: the whole declared size is held.
        let first = try TestHTTPClient(port: gateway.port)
        try first.send("POST /first HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.count)\r\n\r\n")
        try first.send(Array(body[..<(body.count / 2)]))
        #expect(eventually { gateway.server.bodyBudget.inUse == Self.bodySize })

        // The second does not fit: 503 with the stable code, no 100 Continue, connection closed.
        let second = try TestHTTPClient(port: gateway.port)
        try second.send(
            "POST /second HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.count)\r\nExpect: 100-continue\r\n\r\n")
        let refused = try second.readResponse()
        #expect(refused.status == 503)
        #expect(refused.informational.isEmpty)
        #expect(try refused.json()["error"] as? String == "body_budget_exhausted")
        #expect(refused.headers["Retry-After"] == "1")
        #expect(refused.headers["Connection"] == "close")
        #expect(second.waitForClose())
        #expect(self.rejections(gateway) == 1)
        #expect(gateway.server.bodyBudget.inUse == Self.bodySize)

        // A chunked body is refused as soon as its chunks no longer fit.
        let chunked = try TestHTTPClient(port: gateway.port)
        let piece = String(repeating: "c", count: Self.budget - Self.bodySize + 1)
        try chunked.send(
            "POST /chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                + String(piece.utf8.count, radix: 16) + "\r\n" + piece + "\r\n")
        let refusedChunked = try chunked.readResponse()
        #expect(refusedChunked.status == 503)
        #expect(try refusedChunked.json()["error"] as? String == "body_budget_exhausted")
        #expect(self.rejections(gateway) == 2)

        // The first finishes and is forwarded whole; its share comes back after its response.
        try first.send(Array(body[(body.count / 2)...]))
        let forwarded = try first.readResponse()
        #expect(forwarded.status == 200)
        let echo = try forwarded.json()
        #expect(echo["body_bytes"] as? Int == body.count)
        #expect(try forwarded.echoedHeaders().contains { $0.0 == "X-Gate-Body-Bytes" && $0.1 == "\(body.count)" })
        #expect(eventually { gateway.server.bodyBudget.inUse == 0 })

        // Now a body of the same size passes, on a new connection and on the kept one.
        let third = try TestHTTPClient(port: gateway.port)
        try third.send("POST /third HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.count)\r\n\r\n")
        try third.send(body)
        #expect(try third.readResponse().status == 200)
        try first.send("POST /again HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.count)\r\n\r\n")
        try first.send(body)
        #expect(try first.readResponse().status == 200)
        #expect(eventually { gateway.server.bodyBudget.inUse == 0 })
        #expect(gateway.metrics.render().contains("attest_gateway_buffered_body_bytes 0"))
        #expect(self.rejections(gateway) == 2)
    }

    @Test func clientsLeavingMidBodyGiveTheirShareBack() throws {
        let upstream = try UpstreamProcess()
        let gateway = try self.gateway(upstream)
        defer { gateway.stop() }

        let declared = try TestHTTPClient(port: gateway.port)
        try declared.send("POST /gone HTTP/1.1\r\nHost: t\r\nContent-Length: \(Self.bodySize)\r\n\r\n")
        try declared.send([UInt8](repeating: 1, count: 1_000))
        do {
            let chunked = try TestHTTPClient(port: gateway.port)
            try chunked.send("POST /gone-chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
            try chunked.send("1388\r\n" + String(repeating: "z", count: 5_000) + "\r\n")
            #expect(eventually { gateway.server.bodyBudget.inUse == Self.bodySize + 5_000 })
            // This one leaves with a reset: SO_LINGER 0, then its deinit closes the socket.
            var option = linger(l_onoff: 1, l_linger: 0)
            setsockopt(chunked.fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
        }
        #expect(eventually { gateway.server.bodyBudget.inUse == Self.bodySize })
        // The other with a FIN mid-body.
        declared.shutdownWrite()
        #expect(eventually { gateway.server.bodyBudget.inUse == 0 })
        #expect(eventually { gateway.server.openConnections == 0 })

        // The whole budget is free again.
        let next = try TestHTTPClient(port: gateway.port)
        let body = [UInt8](repeating: 2, count: Self.budget)
        try next.send("POST /next HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.count)\r\n\r\n")
        try next.send(body)
        #expect(try next.readResponse().status == 200)
        #expect(eventually { gateway.server.bodyBudget.inUse == 0 })
        #expect(self.rejections(gateway) == 0)
    }

    /// A reload (`update(upstreams:limits:)`) changes the limit of the running budget.
    @Test func reloadChangesTheLimit() throws {
        let upstream = try UpstreamProcess()
        let gateway = try self.gateway(upstream)
        defer { gateway.stop() }
        #expect(gateway.server.bodyBudget.limit == Self.budget)
        var smaller = GatewayLimits()
        smaller.maxBufferedBodyBytes = Self.bodySize - 1
        try gateway.server.update(upstreams: ["api": upstream.configuration], limits: smaller)
        #expect(gateway.server.bodyBudget.limit == Self.bodySize - 1)
        let client = try TestHTTPClient(port: gateway.port)
        try client.send("POST /after-reload HTTP/1.1\r\nHost: t\r\nContent-Length: \(Self.bodySize)\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.status == 503)
        #expect(try response.json()["error"] as? String == "body_budget_exhausted")
        #expect(gateway.server.bodyBudget.inUse == 0)
    }

    @Test func bodiesOverTheRouteCapStill413AndReleaseNothing() throws {
        let upstream = try UpstreamProcess()
        var limits = GatewayLimits()
        limits.maxBufferedBodyBytes = Self.budget
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], gate: BufferingTestGate(cap: 1_000), limits: limits)
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        try client.send("POST /big HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        try client.send("7d0\r\n" + String(repeating: "b", count: 2_000) + "\r\n")
        let response = try client.readResponse()
        #expect(response.status == 413)
        #expect(try response.json()["error"] as? String == "body_too_large")
        #expect(eventually { gateway.server.bodyBudget.inUse == 0 })
        #expect(self.rejections(gateway) == 0)
    }

    /// The built binary: the policy key sets the budget, check-config prints it and warns about
    /// a larger route cap, and a refused request leaves a `body_budget_exhausted` line on stderr.
    @Test func binaryServesThePolicyKeyAndLogsWhy() throws {
        let binary = try ProxyIntegrationTests.gatewayBinary()
        let upstream = try UpstreamProcess()
        let (directory, policy) = try ProxyIntegrationTests.temporaryPolicy(
            "body-budget",
            """
            listen: 127.0.0.1:\(try ProxyIntegrationTests.unusedPort())
            store: memory
            app_ids: ["ABCDE12345.com.example.app"]
            limits: { max_buffered_body_bytes: 1KiB }
            upstreams: { api: { url: "http://127.0.0.1:\(upstream.port)" } }
            routes:
              - { name: protected, match: { path_prefix: / }, upstream: api, mode: enforce, max_body_bytes: 4KiB }
            """)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (process, stderr) = ProxyIntegrationTests.serveProcess(binary: binary, policy: policy)
        // check-config shows the effective budget and warns about the route's larger cap.
        let check = Process()
        check.executableURL = URL(fileURLWithPath: binary)
        check.arguments = ["check-config", policy.path]
        let checkOutput = Pipe()
        check.standardOutput = checkOutput
        check.standardError = checkOutput
        try check.run()
        let report = String(decoding: checkOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        check.waitUntilExit()
        #expect(check.terminationStatus == 0, "\(report)")
        #expect(report.contains("max_buffered_body_bytes=1KiB"))
        #expect(report.contains("routes[0].max_body_bytes: route \"protected\" accepts bodies of up to 4KiB"))

        try process.run()
        defer { Self.stop(process) }
        let (log, listening) = try Self.waitForListening(stderr)
        // serve logs the policy's warnings too, not only check-config (they were dropped).
        #expect(
            log.wait { lines in
                lines.contains {
                    $0.contains("\"event\":\"policy_warning\"") && $0.contains("\"code\":\"body_exceeds_budget\"")
                }
            })

        // Within the budget: read whole, then the gate answers (no assertion: 401).
        let small = try TestHTTPClient.request(
            port: listening,
            "POST /v1/x HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n" + String(repeating: "s", count: 1000))
        #expect(small.status == 401)
        #expect(try small.json()["error"] as? String == "assertion_missing")

        // Beyond it: 503 at once, and the log says why (credentials that decode: without them
        // the request is refused before any budget is reserved).
        let large = try TestHTTPClient.request(
            port: listening,
            "POST /v1/x HTTP/1.1\r\nHost: t\r\nX-App-Attest-Key-Id: BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\r\nX-App-Assertion: AA==\r\nContent-Length: 2000\r\n\r\n"
        )
        #expect(large.status == 503)
        #expect(try large.json()["error"] as? String == "body_budget_exhausted")
        #expect(
            log.wait { lines in
                lines.contains {
                    $0.contains("\"event\":\"body_budget_exhausted\"") && $0.contains("\"route\":\"protected\"")
                        && $0.contains("\"body_bytes\":\"2000\"") && $0.contains("\"max_buffered_body_bytes\":\"1024\"")
                }
            })
    }

    /// The operational log of a started `serve`, and the port it logged `listening` on.
    static func waitForListening(_ stderr: Pipe) throws -> (NonBlockingLines, UInt16) {
        let log = NonBlockingLines(stderr.fileHandleForReading.fileDescriptor)
        var port: UInt16?
        #expect(
            log.wait { lines in
                port = lines.lazy.compactMap { Self.listeningPort($0) }.first
                return port != nil
            })
        return (log, try #require(port))
    }

    static func stop(_ process: Process) {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    static func listeningPort(_ line: String) -> UInt16? {
        guard line.contains("\"listening\""), let range = line.range(of: "\"address\":\"127.0.0.1:") else { return nil }
        return UInt16(line[range.upperBound...].prefix { $0.isNumber })
    }

    // MARK: - HEAD

    /// A gateway-made answer to HEAD has the GET's Content-Length and no body: the next
    /// response on the same connection parses cleanly right after the head.
    @Test func headAnswersCarryTheGetContentLengthWithoutBody() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], gate: DenyingTestGate())
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        try client.send("GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
        let get = try client.readResponse()
        #expect(get.status == 403)
        #expect(!get.body.isEmpty)
        #expect(get.headers["Content-Length"] == String(get.body.count))

        try client.send("HEAD /x HTTP/1.1\r\nHost: t\r\n\r\n" + "GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
        let head = try client.readResponse(method: "HEAD")
        #expect(head.status == 403)
        #expect(head.body.isEmpty)
        #expect(head.headers["Content-Length"] == String(get.body.count))
        #expect(head.headers["Content-Type"] == "application/json")
        let after = try client.readResponse()
        #expect(after.status == 403)
        #expect(after.body == get.body)

        // The proxy's own answers too (no route: 404 from the passthrough gate).
        let routed = try TestGateway(upstreams: ["api": upstream.configuration], routes: [])
        defer { routed.stop() }
        let other = try TestHTTPClient(port: routed.port)
        try other.send("GET /nowhere HTTP/1.1\r\nHost: t\r\n\r\n")
        let notFound = try other.readResponse()
        #expect(notFound.status == 404)
        try other.send("HEAD /nowhere HTTP/1.1\r\nHost: t\r\n\r\nGET /nowhere HTTP/1.1\r\nHost: t\r\n\r\n")
        let headNotFound = try other.readResponse(method: "HEAD")
        #expect(headNotFound.status == 404)
        #expect(headNotFound.body.isEmpty)
        #expect(headNotFound.headers["Content-Length"] == String(notFound.body.count))
        #expect(try other.readResponse().body == notFound.body)
    }
}

/// Lines read from a child's pipe without blocking: `wait` polls until a predicate over all
/// lines so far holds, for at most `seconds`.
final class NonBlockingLines {
    private let fd: Int32
    private var pending: [UInt8] = []
    private(set) var lines: [String] = []

    init(_ fd: Int32) {
        self.fd = fd
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    func wait(seconds: Double = 10, _ condition: ([String]) -> Bool) -> Bool {
        eventually(timeout: .seconds(seconds)) {
            self.drain()
            return condition(self.lines)
        }
    }

    private func drain() {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(self.fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            self.pending.append(contentsOf: chunk[0..<n])
        }
        while let newline = self.pending.firstIndex(of: UInt8(ascii: "\n")) {
            self.lines.append(String(decoding: self.pending[..<newline], as: UTF8.self))
            self.pending.removeSubrange(...newline)
        }
    }
}
