import Foundation
import GatewayTesting
import Testing

@testable import GatewayIO
@testable import HTTP1
@testable import HTTPProxy

@Suite struct ProxyMetricsTests {
    @Test func countersGaugesAndHistogramsRenderInPrometheusTextFormat() {
        let registry = MetricsRegistry()
        let requests = registry.counter("test_requests_total", help: "Requests.", labelNames: ["route", "status"])
        requests.labels("api", "2xx").increment()
        requests.labels("api", "2xx").increment(by: 2)
        requests.labels("say \"hi\"\\", "5xx").increment()
        let gauge = registry.gauge("test_open", help: "Open.").labels()
        gauge.add(5)
        gauge.add(-2)
        let histogram = registry.histogram("test_seconds", help: "Latency.", buckets: [0.001, 0.01, 1]).labels()
        histogram.observe(nanoseconds: 500_000)  // 0.5 ms
        histogram.observe(nanoseconds: 1_000_000)  // exactly 1 ms: le="0.001"
        histogram.observe(nanoseconds: 5_000_000)
        histogram.observe(seconds: 3)

        let text = registry.render()
        #expect(text.contains("# TYPE test_requests_total counter\n"))
        #expect(text.contains("test_requests_total{route=\"api\",status=\"2xx\"} 3\n"))
        #expect(text.contains("test_requests_total{route=\"say \\\"hi\\\"\\\\\",status=\"5xx\"} 1\n"))
        #expect(text.contains("# TYPE test_open gauge\ntest_open 3\n"))
        #expect(text.contains("test_seconds_bucket{le=\"0.001\"} 2\n"))
        #expect(text.contains("test_seconds_bucket{le=\"0.01\"} 3\n"))
        #expect(text.contains("test_seconds_bucket{le=\"1\"} 3\n"))
        #expect(text.contains("test_seconds_bucket{le=\"+Inf\"} 4\n"))
        #expect(text.contains("test_seconds_count 4\n"))
        #expect(text.contains("test_seconds_sum 3.0065\n"))
    }

    @Test func registeringTwiceReturnsTheSameFamily() {
        let registry = MetricsRegistry()
        let a = registry.counter("x_total", help: "x", labelNames: ["k"])
        let b = registry.counter("x_total", help: "x", labelNames: ["k"])
        a.labels("v").increment()
        b.labels("v").increment()
        #expect(a === b)
        #expect(a.labels("v").value64 == 2)
    }

    @Test func concurrentIncrementsAreNotLost() async {
        let registry = MetricsRegistry()
        let counter = registry.counter("c_total", help: "c").labels()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<10_000 { counter.increment() }
                }
            }
        }
        #expect(counter.value64 == 80_000)
    }

    @Test func proxyMetricsCacheSharesChildrenWithTheRegistry() {
        let metrics = ProxyMetrics(registry: MetricsRegistry())
        let cache = ProxyMetricsCache(metrics: metrics)
        cache.route("api").byStatusClass[ProxyMetrics.statusClass(503)].increment()
        cache.route("api").byStatusClass[ProxyMetrics.statusClass(200)].increment()
        #expect(metrics.requests.labels("api", "5xx").value64 == 1)
        #expect(metrics.requests.labels("api", "2xx").value64 == 1)
        #expect(ProxyMetrics.statusClass(101) == 0)
        #expect(ProxyMetrics.statusClass(999) == 4)
    }
}

@Suite struct ProxyAccessLogTests {
    @Test func lineHasEveryFieldAsJSON() throws {
        var buffer = AccessLogBuffer()
        buffer.append(
            .init(
                method: "POST", path: "/v1/a\"b", route: "premium", status: 201, verdict: "verified",
                keyID: "AbCd1234",
                upstreamNanoseconds: 1_234_567, totalNanoseconds: 2_000_999, client: "2001:db8::7"))
        buffer.append(
            .init(
                method: "GET", path: "/x", route: "-", status: 404, verdict: "no_route", keyID: nil,
                upstreamNanoseconds: nil, totalNanoseconds: 999))
        let (bytes, lines) = buffer.take()
        #expect(lines == 2)
        #expect(buffer.isEmpty)
        let text = String(decoding: bytes, as: UTF8.self)
        let split = text.split(separator: "\n")
        #expect(split.count == 2)
        let first = try #require(try JSONSerialization.jsonObject(with: Data(split[0].utf8)) as? [String: Any])
        #expect(first["method"] as? String == "POST")
        #expect(first["path"] as? String == "/v1/a\"b")
        #expect(first["route"] as? String == "premium")
        #expect(first["client"] as? String == "2001:db8::7")
        #expect(first["status"] as? Int == 201)
        #expect(first["verdict"] as? String == "verified")
        #expect(first["key_id"] as? String == "AbCd1234")
        #expect(first["upstream_ms"] as? Double == 1.234)
        #expect(first["total_ms"] as? Double == 2.0)
        let time = try #require(first["time"] as? String)
        #expect(time.count == 24 && time.hasSuffix("Z") && time.contains("T"))
        let second = try #require(try JSONSerialization.jsonObject(with: Data(split[1].utf8)) as? [String: Any])
        #expect(second["key_id"] is NSNull)
        #expect(second["upstream_ms"] is NSNull)
        #expect(second["total_ms"] as? Double == 0)
        #expect(text.contains("\"total_ms\":0.000,"))
    }

    @Test func controlCharactersAreEscaped() {
        var out: [UInt8] = []
        AccessLogBuffer.appendQuoted("a\u{01}\\\n", into: &out)
        #expect(String(decoding: out, as: UTF8.self) == "\"a\\u0001\\\\\\u000a\"")
    }

    /// The word-at-a-time scan against the byte rule: every byte value at every position of
    /// strings long enough for two words and a tail, over a clean background and over high bytes.
    @Test func escapeScanAgreesWithTheByteRuleForEveryByteAndPosition() {
        func needsEscape(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x7F || byte == 0x22 || byte == 0x5C }
        for background: UInt8 in [UInt8(ascii: "a"), 0xC3, 0x80, 0xFF, 0x21, 0x7E] {
            for length in [1, 7, 8, 9, 16, 19] {
                for position in 0..<length {
                    for value in 0...255 {
                        var bytes = [UInt8](repeating: background, count: length)
                        bytes[position] = UInt8(value)
                        let expected = bytes.firstIndex(where: needsEscape) ?? length
                        let scanned = bytes.withUnsafeBufferPointer { AccessLogBuffer.escapeFreePrefix($0) }
                        #expect(scanned == expected, "byte \(value) at \(position) of \(length) over \(background)")
                    }
                }
            }
        }
    }

    @Test func escapesAfterACleanWordKeepTheCleanPrefix() {
        var out: [UInt8] = []
        AccessLogBuffer.appendQuoted("/v1/items?q=\"x\"&u=é\u{7F}", into: &out)
        #expect(String(decoding: out, as: UTF8.self) == #""/v1/items?q=\"x\"&u=é\u007f""#)
    }

    @Test func wallClockFormatIsRFC3339WithMilliseconds() {
        var formatter = WallClockFormatter()
        var out: [UInt8] = []
        formatter.append(seconds: 1_795_000_000, milliseconds: 7, into: &out)
        #expect(String(decoding: out, as: UTF8.self) == "2026-11-18T11:06:40.007Z")
        out.removeAll()
        formatter.append(seconds: 0, milliseconds: 999, into: &out)
        #expect(String(decoding: out, as: UTF8.self) == "1970-01-01T00:00:00.999Z")
    }

    @Test func decimalsAndMilliseconds() {
        var out: [UInt8] = []
        AccessLogBuffer.appendDecimal(0, into: &out)
        out.append(32)
        AccessLogBuffer.appendDecimal(18_446_744_073_709_551_615, into: &out)
        out.append(32)
        AccessLogBuffer.appendMilliseconds(12_345_678_901, into: &out)
        #expect(String(decoding: out, as: UTF8.self) == "0 18446744073709551615 12345.678")
    }

    /// Digit counts at every power of ten and one below it, up to the largest UInt64.
    @Test func decimalsAtEveryPowerOfTen() {
        var power: UInt64 = 1
        for exponent in 0...19 {
            for value in [power, power - 1, power + 1] where value > 0 || exponent == 0 {
                var out: [UInt8] = []
                AccessLogBuffer.appendDecimal(value, into: &out)
                #expect(String(decoding: out, as: UTF8.self) == String(value), "10^\(exponent) ± 1")
            }
            if exponent < 19 { power *= 10 }
        }
        var out: [UInt8] = []
        AccessLogBuffer.appendDecimal(UInt64.max - 1, into: &out)
        #expect(String(decoding: out, as: UTF8.self) == String(UInt64.max - 1))
    }

    @Test func submitsAreDroppedBeyondTheCapInsteadOfBlocking() {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        let log = AccessLog(fd: fds[1], maxPendingBytes: 10)
        log.submit(Array(repeating: 65, count: 100), lineCount: 3)
        #expect(log.droppedLines.load() == 3)
        log.submit(Array("ok\n".utf8), lineCount: 1)
        log.flush()
        var buffer = [UInt8](repeating: 0, count: 16)
        let n = read(fds[0], &buffer, 16)
        #expect(n == 3)
        #expect(Array(buffer[0..<3]) == Array("ok\n".utf8))
    }
}
