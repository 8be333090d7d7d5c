import Foundation
import GatewayTesting
import Synchronization
import Testing

@testable import AppleClient
@testable import GateContract
@testable import GatewayServe
@testable import HTTP1
@testable import PolicyModel

/// The console's figures: differences of the counters `/metrics` renders, over a window held by
/// a ring of minute samples, grouped by route; and the page and data behind the admin token.
@Suite struct EnforcementConsoleTests {
    typealias Route = EnforcementConsoleReport.Route

    static let routes = [
        Route(name: "strict", mode: .enforce, enforcePercent: 100),
        Route(name: "watched", mode: .monitor, enforcePercent: 100),
        Route(name: "rollout", mode: .enforce, enforcePercent: 25),
        Route(name: "public", mode: .off, enforcePercent: 100),
    ]

    /// An exposition with the families the console reads; `scale` multiplies every counter.
    static func exposition(scale: Int, breaker: Int = 0, storeReady: Int = 1, keyLimits: Bool = false) -> String {
        var lines = [
            "# HELP attest_gateway_verdicts_total Requests decided by the App Attest gate, by route and verdict.",
            "# TYPE attest_gateway_verdicts_total counter",
            #"attest_gateway_verdicts_total{route="strict",verdict="verified"} \#(8 * scale)"#,
            #"attest_gateway_verdicts_total{route="strict",verdict="missing"} \#(2 * scale)"#,
            #"attest_gateway_verdicts_total{route="watched",verdict="verified"} \#(6 * scale)"#,
            #"attest_gateway_verdicts_total{route="watched",verdict="missing"} \#(3 * scale)"#,
            #"attest_gateway_verdicts_total{route="watched",verdict="invalid_signature"} \#(1 * scale)"#,
            #"attest_gateway_verdicts_total{route="watched",verdict="counter_replay"} \#(1 * scale)"#,
            #"attest_gateway_verdicts_total{route="watched",verdict="store_error"} 0"#,
            #"attest_gateway_verdicts_total{route="rollout",verdict="verified"} \#(4 * scale)"#,
            #"attest_gateway_verdicts_total{route="rollout",verdict="missing"} \#(4 * scale)"#,
            #"attest_gateway_verdicts_total{route="public",verdict="skipped"} \#(5 * scale)"#,
            #"attest_gateway_verdicts_total{route="-",verdict="malformed"} \#(7 * scale)"#,
            #"attest_gateway_rollout_verdicts_total{route="rollout",arm="monitor",verdict="verified"} \#(3 * scale)"#,
            #"attest_gateway_rollout_verdicts_total{route="rollout",arm="monitor",verdict="missing"} \#(3 * scale)"#,
            #"attest_gateway_rollout_verdicts_total{route="rollout",arm="enforce",verdict="missing"} \#(1 * scale)"#,
            #"attest_gateway_attestations_total{result="verified"} \#(2 * scale)"#,
            #"attest_gateway_attestations_total{result="nonce_mismatch"} \#(1 * scale)"#,
            #"attest_gateway_store_errors_total{operation="advance_counter",kind="store_timeout"} \#(1 * scale)"#,
            "attest_gateway_store_ready \(storeReady)",
            "attest_gateway_apple_breaker_state \(breaker)",
            #"attest_gateway_apple_requests_total{service="devicecheck",outcome="200"} \#(5 * scale)"#,
            #"attest_gateway_apple_requests_total{service="devicecheck",outcome="apple_timeout"} \#(1 * scale)"#,
            #"attest_gateway_requests_total{route="strict",status="2xx"} 999"#,
            #"attest_gateway_bundle_versions_total{version="5.2"} \#(9 * scale)"#,
            #"attest_gateway_bundle_versions_total{version="none"} \#(1 * scale)"#,
        ]
        if keyLimits {
            lines.append(
                #"attest_gateway_key_limit_refusals_total{route="strict",limit="requests_per_minute"} \#(3 * scale)"#)
        }
        return lines.joined(separator: "\n") + "\n"
    }

    @Test func figuresAreTheCountersDifferencesByRoute() throws {
        let baseline = ExpositionSamples(text: Self.exposition(scale: 1), families: EnforcementConsoleReport.Family.all)
        let now = ExpositionSamples(
            text: Self.exposition(scale: 3, breaker: 1, keyLimits: true), families: EnforcementConsoleReport.Family.all)
        let report = EnforcementConsoleReport(now: now, baseline: baseline, windowSeconds: 1800, routes: Self.routes)
        let byName = Dictionary(uniqueKeysWithValues: report.routes.map { ($0.route.name, $0) })

        let strict = try #require(byName["strict"])
        #expect(strict.verdicts == ["verified": 16, "missing": 4])
        #expect(strict.monitored == 0)  // fully enforced: nothing monitored
        #expect(strict.wouldRefuseShare == nil)
        // Absent from the baseline (the family appeared since): counted from 0.
        #expect(strict.keyLimitRefusals == ["requests_per_minute": 9])

        let watched = try #require(byName["watched"])
        #expect(watched.total == 22)
        #expect(watched.groups["verified"] == 12)
        #expect(watched.groups["missing"] == 6)
        #expect(watched.groups["invalid"] == 2)
        #expect(watched.groups["replayed"] == 2)
        #expect(watched.monitored == 22)
        #expect(watched.wouldRefuse == 10)

        // Gradual rollout: only the monitor arm is monitored traffic.
        let rollout = try #require(byName["rollout"])
        #expect(rollout.monitored == 12)
        #expect(rollout.wouldRefuse == 6)

        let passthrough = try #require(byName["public"])
        #expect(passthrough.groups["skipped"] == 10)
        #expect(passthrough.monitored == 0)

        #expect(report.unrouted == ["malformed": 14])
        #expect(report.bundleVersions == ["5.2": 18, "none": 2])
        #expect(report.monitored == 34)
        #expect(report.wouldRefuse == 16)
        #expect(report.keysEnrolled == 4)
        #expect(report.keysEnrolledPerHour == 8)
        #expect(report.storeErrors == 2)
        #expect(report.storeReady == true)
        #expect(report.appleBreakerState == 1)
        #expect(report.appleFailures == 2)
        #expect(report.keyLimitRefusalsPresent)
    }

    @Test func jsonCarriesTheFiguresAndNoRoutesButThePolicys() throws {
        let report = EnforcementConsoleReport(
            now: ExpositionSamples(text: Self.exposition(scale: 2, storeReady: 0)), baseline: ExpositionSamples(),
            windowSeconds: 120, routes: Self.routes)
        let data = Data(report.json(generatedAt: "2026-11-29T00:00:00.000Z").utf8)
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(json["scope"] as? String == "instance")
        #expect(json["window_seconds"] as? Int == 120)
        let routes = try #require(json["routes"] as? [[String: Any]])
        #expect(routes.map { $0["name"] as? String } == ["strict", "watched", "rollout", "public"])
        let rollout = routes[2]
        #expect(rollout["enforce_percent"] as? Int == 25)
        #expect(routes[1]["enforce_percent"] as? Int == 0)
        #expect((rollout["groups"] as? [String: Int])?["missing"] == 8)
        #expect(rollout["would_refuse_share"] as? Double == 0.5)
        #expect(routes[0]["would_refuse_share"] is NSNull)
        #expect((json["redis"] as? [String: Any])?["ready"] as? Bool == false)
        #expect((json["apple"] as? [String: Any])?["breaker"] as? String == "closed")
        // Under 10 minutes of window: no rate per hour.
        #expect((json["keys_enrolled"] as? [String: Any])?["per_hour"] is NSNull)
        #expect((json["keys_enrolled"] as? [String: Any])?["window"] as? Int == 4)
        #expect(json["key_limit_refusals_present"] as? Bool == false)
        #expect((json["unrouted"] as? [String: Any])?["requests"] as? Int == 14)
        #expect(json["bundle_versions"] as? [String: Int] == ["5.2": 18, "none": 2])
    }

    @Test func theLastHourIsCountedFromTheOldestSampleWithinIt() {
        let clock = Mutex<Double>(0)
        let text = Mutex(Self.exposition(scale: 0))
        let console = EnforcementConsole(render: { text.withLock { $0 } }, clock: { clock.withLock { $0 } })
        // Minute samples as the counters grow by one "scale" a minute.
        for minute in 1...90 {
            clock.withLock { $0 = Double(minute * 60) }
            text.withLock { $0 = Self.exposition(scale: minute) }
            console.sample()
        }
        clock.withLock { $0 = 90 * 60 + 30 }
        let report = console.report(routes: Self.routes)
        // The ring keeps 61 samples: minutes 30...90; the oldest within the hour is minute 31.
        #expect(report.windowSeconds == 90 * 60 + 30 - 31 * 60)
        let strict = report.routes.first { $0.route.name == "strict" }
        #expect(strict?.verdicts["verified"] == 8 * (90 - 31))
    }

    @Test func ringIsBoundedAndFallsBackToItsNewestSample() {
        var ring = MinuteSampleRing(start: 0, capacity: 5, windowSeconds: 300)
        for minute in 1...20 { ring.record(ExpositionSamples(), at: Double(minute * 60)) }
        #expect(ring.count == 5)
        #expect(ring.baseline(at: 20 * 60).time == 16 * 60)
        // A sampler that stopped: nothing within the window, the newest sample is the baseline.
        #expect(ring.baseline(at: 100 * 60).time == 20 * 60)
    }

    @Test func expositionLinesParseWithEscapedLabelValues() {
        let samples = ExpositionSamples(
            text: """
                # HELP x_total A counter.
                x_total{route="a\\"b",verdict="v"} 3
                y 1.5
                broken{route="unterminated 1
                """)
        #expect(samples.values[.init(name: "x_total", labels: [.init("route", "a\"b"), .init("verdict", "v")])] == 3)
        #expect(samples.values[.init(name: "y", labels: [])] == 1.5)
        #expect(samples.values.count == 2)
    }

    @Test func pageAndDataNeedTheAdminTokenWhenOneIsConfigured() async throws {
        let console = EnforcementConsole(render: { Self.exposition(scale: 1) })
        let token = DeviceCheckAdminToken(Array("0123456789abcdef0123".utf8))
        let gate = AdminGate(
            metricsText: { "" }, store: { nil }, isPolicyLoaded: { true }, console: console,
            consoleRoutes: Self.routes, adminToken: token)
        for path in ["/console", "/console.json"] {
            let refused = await runGate(gate, request("GET", path)).1
            #expect(refused.status == 401, "\(path)")
            #expect(refused.localResponse?.headers["WWW-Authenticate"] == "Bearer")
            let wrong = await runGate(gate, request("GET", path, headers: [("Authorization", "Bearer nope")])).1
            #expect(wrong.status == 401)
            let admitted = await runGate(
                gate, request("GET", path, headers: [("Authorization", "Bearer 0123456789abcdef0123")])
            ).1
            #expect(admitted.status == 200, "\(path)")
        }
        let open = AdminGate(
            metricsText: { "" }, store: { nil }, isPolicyLoaded: { true }, console: console, consoleRoutes: Self.routes)
        let page = try #require(await runGate(open, request("GET", "/console")).1.localResponse)
        #expect(page.status == 200)
        let policy = try #require(page.headers["Content-Security-Policy"])
        #expect(policy.hasPrefix("default-src 'none'; script-src 'sha256-"))
        #expect(!policy.contains("unsafe"))
        let html = String(decoding: page.body, as: UTF8.self)
        // Self-contained: no URL to fetch but the data beside it.
        #expect(!html.contains("http://") && !html.contains("https://") && !html.contains("src="))
        #expect(html.contains("fetch(\"console.json\""))
        let data = try #require(await runGate(open, request("GET", "/console.json")).1.localResponse)
        #expect(data.headers["Content-Type"] == "application/json")
        #expect(data.headers["Cache-Control"] == "no-store")
        let post = await runGate(open, request("POST", "/console.json")).1
        #expect(post.status == 405)
    }

    /// The CSP's hashes are those of the page's one style and one script, as the browser hashes them.
    @Test func contentSecurityPolicyHashesMatchTheInlineElements() throws {
        let html = EnforcementConsolePage.html
        func between(_ open: String, _ close: String) throws -> String {
            let start = try #require(html.range(of: open))
            let end = try #require(html.range(of: close, range: start.upperBound..<html.endIndex))
            return String(html[start.upperBound..<end.lowerBound])
        }
        let script = try between("<script>", "</script>")
        let style = try between("<style>", "</style>")
        let csp = EnforcementConsolePage.contentSecurityPolicy
        #expect(csp.contains("script-src \(EnforcementConsolePage.hashSource(script));"))
        #expect(csp.contains("style-src \(EnforcementConsolePage.hashSource(style));"))
        #expect(html.components(separatedBy: "<script").count == 2)
        #expect(html.components(separatedBy: "<style").count == 2)
    }
}
