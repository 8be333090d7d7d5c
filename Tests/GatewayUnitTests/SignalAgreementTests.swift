import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import Enforcement
@testable import GatewayIO
@testable import HTTPProxy
@testable import KeyStore
@testable import PolicyModel

/// The access log and the two request families say the same thing about every request: a
/// request refused before routing (by the parser or by the gate's rules) keeps its stable code
/// in the log line and in `attest_gateway_refusals_total`, and each request is counted once in
/// `attest_gateway_requests_total` and once in `attest_gateway_verdicts_total`.
@Suite struct SignalAgreementTests {
    /// Sums a family's series in `registry`'s exposition, or the one series with `labels`.
    static func total(_ text: String, _ family: String, _ labels: String? = nil) -> Int {
        text.split(separator: "\n").reduce(0) { sum, line in
            guard line.hasPrefix(family + "{") || line.hasPrefix(family + " ") else { return sum }
            if let labels, !line.hasPrefix(family + "{" + labels + "}") { return sum }
            return sum + (Int(line.split(separator: " ").last ?? "") ?? 0)
        }
    }

    @Test func refusalsBeforeRoutingKeepTheirCodeAndEveryRequestIsCountedOnceInBothFamilies() async throws {
        var policy = EnforcementHarness.policy()
        policy.routes = [
            RoutePolicy(
                name: "pub", match: .init(pathPrefix: "/pub"), upstream: InMemoryProxyHarness.upstreamName, mode: .off)
        ]
        let registry = MetricsRegistry()
        let gate = try AttestGate(
            policy: policy, store: MemoryStore(),
            metrics: GatewayGateMetrics(registry: registry, routeNames: policy.routes.map(\.name)))
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        let harness = try InMemoryProxyHarness(
            gate: gate, metrics: registry, accessLog: AccessLog(fd: fds[1]))

        // The parser refuses a lower-case method: no gate is asked.
        let lowerCase = try harness.connect()
        lowerCase.send("get /pub/a HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try await lowerCase.readResponse().status == 400)
        // The parser refuses a head without Host after its request line: that line is logged.
        let noHost = try harness.connect()
        noHost.send("GET /pub/d?token=secret HTTP/1.1\r\nAccept: */*\r\n\r\n")
        #expect(try await noHost.readResponse().status == 400)
        // The gate's rules refuse an ambiguous target in `classify`.
        let ambiguous = try harness.connect()
        ambiguous.send("GET /pub//b HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try await ambiguous.readResponse().status == 400)
        // Forwarded.
        let forwarded = try harness.connect()
        forwarded.send("GET /pub/c HTTP/1.1\r\nHost: t\r\n\r\n")
        let upstream = try #require(await harness.upstream.accept())
        _ = try await upstream.readRequest()
        upstream.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(try await forwarded.readResponse().status == 200)
        await harness.stop()

        let text = registry.render()
        #expect(Self.total(text, "attest_gateway_requests_total") == 4)
        #expect(Self.total(text, "attest_gateway_verdicts_total") == 4)
        #expect(Self.total(text, "attest_gateway_verdicts_total", #"route="-",verdict="malformed""#) == 3)
        #expect(Self.total(text, "attest_gateway_verdicts_total", #"route="pub",verdict="skipped""#) == 1)
        #expect(Self.total(text, "attest_gateway_refusals_total", #"route="-",code="invalid_method""#) == 1)
        #expect(Self.total(text, "attest_gateway_refusals_total", #"route="-",code="ambiguous_target""#) == 1)
        #expect(Self.total(text, "attest_gateway_refusals_total", #"route="-",code="missing_host""#) == 1)
        #expect(Self.total(text, "attest_gateway_refusals_total") == 3)

        var bytes = [UInt8](repeating: 0, count: 64 * 1024)
        let count = read(fds[0], &bytes, bytes.count)
        let lines = String(decoding: bytes[0..<max(count, 0)], as: UTF8.self).split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(lines.count == 4)
        let byCode = Dictionary(grouping: lines) { $0["code"] as? String ?? "null" }
        let parserLine = try #require(byCode["invalid_method"]?.first)
        #expect(parserLine["verdict"] as? String == "malformed")
        #expect(parserLine["method"] as? String == "-")
        // The parser's refusal after a valid request line: its method and path, never the query.
        let noHostLine = try #require(byCode["missing_host"]?.first)
        #expect(noHostLine["method"] as? String == "GET")
        #expect(noHostLine["path"] as? String == "/pub/d")
        let gateLine = try #require(byCode["ambiguous_target"]?.first)
        #expect(gateLine["method"] as? String == "GET")
        #expect(gateLine["path"] as? String == "/pub//b")
        #expect(gateLine["verdict"] as? String == "malformed")
        let forwardedLine = try #require(byCode["null"]?.first)
        #expect(forwardedLine["code"] is NSNull)
        #expect(forwardedLine["status"] as? Int == 200)
    }

    /// A head that never arrives whole is answered 408 by the proxy, no gate asked: it is counted
    /// once in each family (`rejected`), with its code.
    @Test func aRequestTimedOutBeforeTheGateIsCountedOnceInBothFamilies() async throws {
        let registry = MetricsRegistry()
        var limits = GatewayLimits()
        limits.headerReadTimeout = .milliseconds(100)
        let harness = try InMemoryProxyHarness(limits: limits, metrics: registry)
        let client = try harness.connect()
        client.send("GET /slow HTTP/1.1\r\nHost: t\r\n")
        #expect(try await client.readResponse().status == 408)
        await harness.stop()
        let text = registry.render()
        #expect(Self.total(text, "attest_gateway_requests_total") == 1)
        #expect(Self.total(text, "attest_gateway_verdicts_total", #"route="-",verdict="rejected""#) == 1)
        #expect(Self.total(text, "attest_gateway_verdicts_total") == 1)
        #expect(Self.total(text, "attest_gateway_refusals_total", #"route="-",code="request_timeout""#) == 1)
    }

    /// Loop-ordered: each loop's lines carry its index and a sequence that counts from 1.
    @Test func eachLoopStampsItsLinesWithItsIndexAndASequence() throws {
        var first = AccessLogBuffer(loopIndex: 0)
        var second = AccessLogBuffer(loopIndex: 1)
        for buffer in [0, 1, 0] {
            let entry = AccessLogBuffer.Entry(
                method: "GET", path: "/", route: "-", status: 200, verdict: "skipped", keyID: nil,
                upstreamNanoseconds: nil, totalNanoseconds: 1)
            if buffer == 0 { first.append(entry) } else { second.append(entry) }
        }
        func stamps(_ buffer: inout AccessLogBuffer) -> [[Int]] {
            String(decoding: buffer.take().bytes, as: UTF8.self).split(separator: "\n").compactMap {
                let object = try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                guard let loop = object?["loop"] as? Int, let seq = object?["seq"] as? Int else { return nil }
                return [loop, seq]
            }
        }
        #expect(stamps(&first) == [[0, 1], [0, 2]])
        #expect(stamps(&second) == [[1, 1]])
    }
}
