import Foundation
import GatewayTesting
import Testing

@testable import GatewayIO
@testable import HTTPProxy
@testable import PolicyModel

/// `http2:` (client connection settings, flood thresholds) and `upstreams.NAME.idle_timeout`:
/// decoder bounds, errors naming file, line and field, lint, and the values a new connection's
/// session and flood guard are built from.
@Suite struct HTTP2PolicyTests {
    private static let h2cListener = "listen: [{ address: \"127.0.0.1:8081\", h2c: true }]\n"

    private func load(_ extra: String) throws -> GatewayPolicy {
        try PolicyLoader.parse(minimalPolicy(Self.h2cListener + extra), sourcePath: "policies.yaml")
    }

    private func warnings(_ text: String) throws -> [PolicyWarning] {
        var warnings: [PolicyWarning] = []
        _ = try PolicyLoader.parse(text, sourcePath: "policies.yaml", warnings: &warnings)
        return warnings
    }

    @Test func defaultsAreTheDocumentedOnes() throws {
        let policy = try self.load("")
        #expect(policy.http2 == HTTP2Policy())
        #expect(policy.http2.maxConcurrentStreams == 100)
        #expect(policy.http2.initialWindowSize == 65_535)
        #expect(policy.http2.hpackTableSize == 4096)
        #expect(policy.http2.maxContinuations == 8)
        let rates = policy.http2.maxPerSecond
        let defaults: [Int] = [
            rates.ping, rates.settings, rates.priority, rates.rstStream, rates.emptyData, rates.windowUpdate,
        ]
        #expect(defaults == [50, 50, 500, 100, 200, 10_000])
        #expect(policy.upstreams["api"]?.idleTimeout == .seconds(60))
        #expect(policy.upstreams["api"]?.pingInterval == nil)
        // The defaults are what the session used before the block existed.
        let settings = HTTP2Session.Settings(policy: policy.http2, limits: policy.limits)
        #expect(settings.maxConcurrentStreams == HTTP2Session.Settings().maxConcurrentStreams)
        #expect(settings.initialWindowSize == HTTP2Session.Settings().initialWindowSize)
        #expect(settings.maxDeflateDynamicTableSize == HTTP2Session.Settings().maxDeflateDynamicTableSize)
        #expect(settings.maxContinuations == HTTP2Session.Settings().maxContinuations)
        #expect(HTTP2FloodGuard.Limits(policy: policy.http2) == HTTP2FloodGuard.Limits())
    }

    @Test func everyKeyIsReadAndReachesTheSessionSettings() throws {
        let policy = try self.load(
            """
            limits: { max_header_bytes: 8192, max_header_count: 50 }
            http2:
              max_concurrent_streams: 7
              initial_window_size: 1MiB
              hpack_table_size: 0
              max_continuations: 3
              max_per_second: { ping: 5, settings: 6, priority: 7, rst_stream: 8, empty_data: 9, window_update: 10 }
            """)
        let http2 = policy.http2
        #expect(http2.maxConcurrentStreams == 7)
        #expect(http2.initialWindowSize == 1 << 20)
        #expect(http2.hpackTableSize == 0)
        #expect(http2.maxContinuations == 3)
        let settings = HTTP2Session.Settings(policy: http2, limits: policy.limits)
        #expect(settings.maxConcurrentStreams == 7)
        #expect(settings.initialWindowSize == 1 << 20)
        #expect(settings.maxDeflateDynamicTableSize == 0)
        #expect(settings.maxContinuations == 3)
        #expect(settings.maxHeaderListSize == UInt32(8192 + 32 * 50))
        let limits = HTTP2FloodGuard.Limits(policy: http2)
        let configured: [Int] = [
            limits.pingsPerSecond, limits.settingsPerSecond, limits.prioritiesPerSecond, limits.resetsPerSecond,
            limits.emptyDataPerSecond, limits.windowUpdatesPerSecond,
        ]
        #expect(configured == [5, 6, 7, 8, 9, 10])
    }

    @Test func checkConfigSummaryShowsTheBlockOnlyWhenSet() throws {
        #expect(!PolicySummary.render(try self.load("")).contains("http2"))
        let summary = PolicySummary.render(try self.load("http2: { max_concurrent_streams: 7 }"))
        #expect(summary.contains("max_concurrent_streams=7 initial_window_size=65535"), "\(summary)")
    }

    @Test func aConfiguredFloodLimitIsTheOneTheGuardEnforces() throws {
        var http2 = HTTP2Policy()
        http2.maxPerSecond.ping = 3
        var guardian = HTTP2FloodGuard(limits: HTTP2FloodGuard.Limits(policy: http2))
        let verdicts = (0..<4).map { _ in guardian.received(.ping, isAck: false, length: 8, at: 1_000) }
        #expect(verdicts == [nil, nil, nil, .ping])
    }

    @Test(arguments: [
        ("max_concurrent_streams: 0", "http2.max_concurrent_streams", "out_of_range"),
        ("max_concurrent_streams: 1001", "http2.max_concurrent_streams", "out_of_range"),
        ("max_concurrent_streams: many", "http2.max_concurrent_streams", "wrong_type"),
        ("initial_window_size: 1000", "http2.initial_window_size", "out_of_range"),
        ("initial_window_size: 17MiB", "http2.initial_window_size", "out_of_range"),
        ("initial_window_size: lots", "http2.initial_window_size", "invalid_size"),
        ("hpack_table_size: 65KiB", "http2.hpack_table_size", "out_of_range"),
        ("max_continuations: 65", "http2.max_continuations", "out_of_range"),
        ("max_per_second: { ping: 0 }", "http2.max_per_second.ping", "out_of_range"),
        ("max_per_second: { rst_stream: 1000001 }", "http2.max_per_second.rst_stream", "out_of_range"),
        ("max_per_second: { pings: 5 }", "http2.max_per_second.pings", "unknown_key"),
        ("max_streams: 5", "http2.max_streams", "unknown_key"),
    ])
    func outOfBoundsValuesAreRefusedNamingFileLineAndField(setting: String, field: String, code: String) throws {
        let text = minimalPolicy(Self.h2cListener + "http2:\n  \(setting)\n")
        let error = try #require(policyError(text))
        #expect(error.code.description == code, "\(error)")
        #expect(error.file == "policies.yaml")
        #expect(error.field == field, "\(error)")
        // The setting's line: the listener, the minimal policy's six lines, then `http2:`.
        let line = text.split(separator: "\n", omittingEmptySubsequences: false).firstIndex {
            $0.hasPrefix("  \(setting.prefix(while: { $0 != ":" }))")
        }
        #expect(error.line == (line ?? -1) + 1, "\(error)")
        #expect(error.description.hasPrefix("policies.yaml:\(error.line):"), "\(error)")
    }

    @Test func upstreamIdleTimeoutIsBoundedAndReadForHTTP2Upstreams() throws {
        let upstream =
            "upstreams:\n  api: { url: \"http://127.0.0.1:9000\", protocol: h2c, idle_timeout: 5s, ping_interval: 2s }\n"
        let text =
            Self.h2cListener + "store: memory\n" + upstream
            + "routes:\n  - { match: { path_prefix: / }, upstream: api, mode: off }\n"
        let policy = try PolicyLoader.parse(text, sourcePath: "policies.yaml")
        #expect(policy.upstreams["api"]?.idleTimeout == .seconds(5))
        #expect(policy.upstreams["api"]?.pingInterval == .seconds(2))
        #expect(try self.warnings(text).filter { $0.code == "setting_without_effect" } == [])

        let tooLong = text.replacingOccurrences(of: "idle_timeout: 5s", with: "idle_timeout: 2h")
        let error = try #require(policyError(tooLong))
        #expect(error.code == .outOfRange, "\(error)")
        #expect(error.field == "upstreams.api.idle_timeout", "\(error)")
        #expect(error.line == 4, "\(error)")
    }

    @Test func lintWarnsOnASmallWindow() throws {
        let found = try self.warnings(minimalPolicy(Self.h2cListener + "http2:\n  initial_window_size: 16KiB\n"))
        let warning = try #require(found.first { $0.code == "http2_small_window" })
        #expect(warning.field == "http2.initial_window_size")
        #expect(warning.line == 10)
        #expect(warning.message.contains("16384"))
        // HTTP/2's own default is not small.
        let fine = try self.warnings(minimalPolicy(Self.h2cListener + "http2:\n  initial_window_size: 65535\n"))
        #expect(!fine.contains { $0.code == "http2_small_window" })
    }

    @Test func lintWarnsWhenNoListenerSpeaksHTTP2() throws {
        let found = try self.warnings(minimalPolicy("http2:\n  max_concurrent_streams: 10\n"))
        let warning = try #require(found.first { $0.code == "setting_without_effect" })
        #expect(warning.field == "http2")
        let served = try self.warnings(minimalPolicy(Self.h2cListener + "http2:\n  max_concurrent_streams: 10\n"))
        #expect(!served.contains { $0.code == "setting_without_effect" })
    }

    @Test func lintWarnsOnAnIdleTimeoutForAnHTTP1Upstream() throws {
        let text =
            "store: memory\nupstreams:\n  api: { url: \"http://127.0.0.1:9000\", idle_timeout: 30s }\n"
            + "routes:\n  - { match: { path_prefix: / }, upstream: api, mode: off }\n"
        let found = try self.warnings(text)
        let warning = try #require(found.first { $0.code == "setting_without_effect" })
        #expect(warning.field == "upstreams.api.idle_timeout")
        #expect(warning.line == 3)
    }
}
