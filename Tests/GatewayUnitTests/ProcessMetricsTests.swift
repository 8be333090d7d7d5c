import Foundation
import GatewayTesting
import Testing

@testable import GateContract
@testable import GatewayIO
@testable import GatewayServe
@testable import HTTP1

/// `process_*`, `attest_gateway_build_info`, reload metrics and `/config`: parsing without the
/// kernel, then one scrape of this very process.
@Suite struct ProcessMetricsTests {
    @Test func statFieldsAreCountedAfterTheCommandName() throws {
        // A command name with spaces and a parenthesis must not shift the fields.
        let fields = (3...52).map { String($0) }
        var values = fields
        values[14 - 3] = "250"  // utime
        values[15 - 3] = "150"  // stime
        values[22 - 3] = "1000"  // starttime
        let text = "4242 (attest gw (x)) " + values.joined(separator: " ") + "\n"
        let stat = try #require(ProcessMetrics.parseStat(text, ticksPerSecond: 100))
        #expect(stat.cpuSeconds == 4)
        #expect(stat.startSecondsAfterBoot == 10)
        #expect(ProcessMetrics.parseStat("4242 (truncated) S 1 2", ticksPerSecond: 100) == nil)
        #expect(ProcessMetrics.parseStat("no parenthesis", ticksPerSecond: 100) == nil)
    }

    @Test func thisProcessIsScraped() throws {
        let registry = MetricsRegistry()
        ProcessMetrics.export(through: registry)
        BuildInfoMetric.export(through: registry)
        let text = registry.render()
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " ") else { continue }
            values[String(line[..<space])] = Double(line[line.index(after: space)...])
        }
        #expect(values["process_resident_memory_bytes", default: 0] > 1_000_000)
        #expect(values["process_open_fds", default: 0] >= 3)
        #expect(values["process_max_fds", default: 0] >= values["process_open_fds", default: .infinity])
        #expect(values["process_cpu_seconds_total", default: -1] >= 0)
        let start = values["process_start_time_seconds", default: 0]
        #expect(start > Date().timeIntervalSince1970 - 86_400 * 30 && start <= Date().timeIntervalSince1970 + 1)
        let build = try #require(values.first { $0.key.hasPrefix("attest_gateway_build_info{") })
        #expect(build.value == 1)
        #expect(build.key.contains("version=\"\(GatewayVersion.version)\""))
        #expect(build.key.contains("openssl=\"OpenSSL 3."))
    }

    @Test func scrapedValuesKeepIntegersIntegral() {
        #expect(ScrapedFamily.format(3) == "3")
        #expect(ScrapedFamily.format(0) == "0")
        #expect(ScrapedFamily.format(1.25) == "1.25")
    }

    @Test func reloadMetricsFollowTheLastOutcome() {
        let registry = MetricsRegistry()
        let metrics = ConfigReloadMetrics(registry: registry)
        metrics.started(at: Date(timeIntervalSince1970: 1_000))
        metrics.reloadFailed()
        #expect(registry.render().contains("attest_gateway_config_last_reload_successful 0\n"))
        metrics.reloaded(at: Date(timeIntervalSince1970: 2_000))
        let text = registry.render()
        #expect(text.contains("attest_gateway_config_last_reload_successful 1\n"))
        #expect(text.contains("attest_gateway_config_last_reload_success_timestamp_seconds 2000\n"))
        #expect(text.contains("attest_gateway_config_reloads_total{result=\"ok\"} 1\n"))
        #expect(text.contains("attest_gateway_config_reloads_total{result=\"failed\"} 1\n"))
    }

    @Test func adminConfigServesTheSummary() async {
        let gate = AdminGate(
            metricsText: { "" }, configText: { "route api path_prefix=/v1\n" }, store: { nil },
            isPolicyLoaded: { true })
        let response = await runGate(gate, request("GET", "/config")).1.localResponse
        #expect(response?.status == 200)
        #expect(response?.headers["Cache-Control"] == "no-store")
        #expect(response.map { String(decoding: $0.body, as: UTF8.self) } == "route api path_prefix=/v1\n")
    }
}
