import Foundation
import GatewayTesting
import Glibc
import Testing

extension EndToEnd {
    /// The enforcement console as an operator opens it: headless Chromium (Debian's) loads
    /// `/console` from a running gateway with live traffic; the figures the page renders are the
    /// ones `/metrics` shows at the same moment, and the page ran without a JavaScript error (or
    /// a Content-Security-Policy refusal: the page counts both into `data-js-errors`).
    /// `CONSOLE_SCREENSHOT=path` also saves a screenshot there (docs/console.png).
    @Suite struct Console {
        /// The console's columns, written out independently of the gateway's grouping.
        static let groups: [String: [String]] = [
            "verified": ["verified"],
            "missing": ["missing"],
            "replayed": ["counter_replay"],
            "skipped": ["skipped"],
            "invalid": [
                "malformed", "invalid_signature", "unknown_key", "revoked_key", "challenge_invalid",
                "app_id_mismatch", "environment_mismatch", "launch_validation_refused", "debug_token_invalid",
                "devicecheck_refused", "risk_metric_exceeded",
            ],
        ]

        /// `chromium --headless` with a profile of its own in the test's directory.
        static func chromium(_ arguments: [String], in directory: TemporaryDirectory) throws -> ToolRun {
            try ToolRun.run(
                try E2EPaths.executable("chromium"),
                [
                    "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--disable-extensions",
                    "--user-data-dir=\(directory.file("chromium-profile"))", "--virtual-time-budget=8000",
                ] + arguments,
                in: directory, timeout: .seconds(90))
        }

        /// The text of the element carrying `data-route`/`data-field` (or a card's `data-field`).
        static func field(_ dom: String, route: String?, _ field: String) -> String? {
            let attributes =
                route.map { #"data-route="\#($0)" data-field="\#(field)""# } ?? #"data-field="\#(field)""#
            guard let start = dom.range(of: attributes) else { return nil }
            guard let open = dom.range(of: ">", range: start.upperBound..<dom.endIndex),
                let close = dom.range(of: "<", range: open.upperBound..<dom.endIndex)
            else { return nil }
            return String(dom[open.upperBound..<close.lowerBound])
        }

        @Test(.timeLimit(.minutes(3)))
        func chromiumRendersTheFiguresTheMetricsShowWithoutAJavaScriptError() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let observed = try ObservedGateway(world)
            try observed.traffic(storeError: true)
            let gateway = observed.gateway
            let url = "http://127.0.0.1:\(gateway.ports.admin)/console"

            let before = try gateway.metrics()
            let run = try Self.chromium(["--dump-dom", url], in: world.directory)
            let after = try gateway.metrics()
            #expect(run.status == 0, "chromium: \(run.stderr.suffix(600))")
            let dom = run.stdout
            #expect(dom.contains(#"data-state="rendered""#), "the page did not render: \(dom.prefix(1500))")
            #expect(dom.contains(#"data-js-errors="0""#), "JavaScript errors: \(dom.prefix(1500))")

            // Nothing but admin requests between the two scrapes: the figures are the same in both.
            func verdicts(_ metrics: [String: Double], route: String) -> [String: Int] {
                var counts: [String: Int] = [:]
                let prefix = #"attest_gateway_verdicts_total{route="\#(route)",verdict=""#
                for (series, value) in metrics where series.hasPrefix(prefix) {
                    counts[String(series.dropFirst(prefix.count).dropLast(2)), default: 0] += Int(value)
                }
                return counts
            }
            for route in ["strict", "watched", "public"] {
                let counted = verdicts(after, route: route)
                #expect(counted == verdicts(before, route: route))
                #expect(Self.field(dom, route: route, "requests") == String(counted.values.reduce(0, +)), "\(route)")
                var grouped = 0
                for (group, members) in Self.groups {
                    let expected = members.reduce(0) { $0 + (counted[$1] ?? 0) }
                    grouped += expected
                    #expect(Self.field(dom, route: route, group) == String(expected), "\(route) \(group)")
                }
                let other = counted.values.reduce(0, +) - grouped
                #expect(Self.field(dom, route: route, "other") == String(other), "\(route) other")
            }
            #expect((verdicts(after, route: "strict")["verified"] ?? 0) >= 3)
            #expect((verdicts(after, route: "strict")["store_error"] ?? 0) >= 1)
            // Monitored traffic: all of route watched; enforcement would refuse all but verified.
            let watched = verdicts(after, route: "watched")
            let watchedTotal = watched.values.reduce(0, +)
            let wouldRefuse = watchedTotal - (watched["verified"] ?? 0)
            #expect(watchedTotal >= 2 && wouldRefuse >= 1)
            let share = String(format: "%.1f %%", Double(wouldRefuse) / Double(watchedTotal) * 100)
            #expect(Self.field(dom, route: "watched", "would_refuse") == "\(wouldRefuse) (\(share))")
            #expect(Self.field(dom, route: nil, "would-refuse") == share)
            #expect(Self.field(dom, route: "strict", "enforce_percent") == "100")
            #expect(Self.field(dom, route: "watched", "mode") == "monitor")
            // Refused before routing: the lower-case method and the ambiguous target.
            let unrouted = verdicts(after, route: "-")
            #expect(unrouted["malformed"] == 2)
            #expect(
                Self.field(dom, route: nil, "unrouted")?.hasPrefix("\(unrouted.values.reduce(0, +)) requests ") == true)
            // Valid assertions by app version, as the bundle-version family counts them.
            let versionPrefix = #"attest_gateway_bundle_versions_total{version=""#
            let versions = after.filter { $0.key.hasPrefix(versionPrefix) && $0.value > 0 }
                .map { (String($0.key.dropFirst(versionPrefix.count).dropLast(2)), Int($0.value)) }
                .sorted { $0.0 < $1.0 }
            #expect(!versions.isEmpty)
            #expect(
                Self.field(dom, route: nil, "versions")
                    == "Valid assertions by app version: "
                    + versions.map { "\($0.0): \($0.1)" }.joined(separator: ", ") + ".")
            // Health and enrolment.
            #expect(after["attest_gateway_store_ready"] == 1)
            #expect(Self.field(dom, route: nil, "redis") == "ready")
            #expect(after["attest_gateway_apple_breaker_state"] == 0)
            #expect(Self.field(dom, route: nil, "apple") == "breaker closed")
            let enrolled = Int(after[#"attest_gateway_attestations_total{result="verified"}"#] ?? -1)
            #expect(enrolled == 1)
            #expect(Self.field(dom, route: nil, "keys-enrolled") == String(enrolled))

            // The access log is loop-ordered (docs/operations.md): per loop, `seq` counts 1, 2, 3, …
            // in the order of the lines, and `time` never goes back.
            let answered = Int(after.filter { $0.key.hasPrefix("attest_gateway_requests_total{") }.values.reduce(0, +))
            #expect(eventually(timeout: .seconds(5)) { gateway.accessLog.count >= answered })
            for (loop, lines) in Dictionary(grouping: gateway.accessLog, by: { $0["loop"] as? Int ?? -1 }) {
                #expect(loop >= 0)
                let sequence = lines.compactMap { $0["seq"] as? Int }
                #expect(sequence == Array(1..<(sequence.count + 1)), "loop \(loop)")
                let times = lines.compactMap { $0["time"] as? String }
                #expect(times == times.sorted(), "loop \(loop)")
            }

            if let path = ProcessInfo.processInfo.environment["CONSOLE_SCREENSHOT"], !path.isEmpty {
                let shot = try Self.chromium(
                    ["--screenshot=\(path)", "--window-size=1280,640", "--hide-scrollbars", url], in: world.directory)
                #expect(shot.status == 0 && FileManager.default.fileExists(atPath: path))
            }
        }
    }
}
