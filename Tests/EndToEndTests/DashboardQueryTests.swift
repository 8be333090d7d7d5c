import Foundation
import GatewayTesting
import Glibc
import Testing

extension EndToEnd {
    /// deploy/grafana/attest-gateway.json against the real thing: a Prometheus (Debian's, its own
    /// configuration, a free loopback port) scrapes a running gateway carrying live traffic, and
    /// every panel's every query, run through Prometheus' HTTP API, returns data.
    @Suite struct Dashboard {
        /// Each panel's title and query expressions, Grafana's interval variables replaced by
        /// what the test's one-second scrapes need.
        static func panelQueries() throws -> [(panel: String, expression: String)] {
            let path = E2EPaths.repositoryRoot.appendingPathComponent("deploy/grafana/attest-gateway.json").path
            let data = try #require(FileManager.default.contents(atPath: path))
            let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            let panels = try #require(dashboard["panels"] as? [[String: Any]])
            var queries: [(String, String)] = []
            for panel in panels {
                let title = panel["title"] as? String ?? "?"
                for target in panel["targets"] as? [[String: Any]] ?? [] {
                    guard let expression = target["expr"] as? String else { continue }
                    queries.append(
                        (
                            title,
                            expression.replacingOccurrences(of: "$__rate_interval", with: "1m")
                                .replacingOccurrences(of: "$__range", with: "5m")
                        ))
                }
            }
            return queries
        }

        @Test(.timeLimit(.minutes(2)))
        func everyPanelQueryReturnsDataFromAScrapedGateway() throws {
            let queries = try Self.panelQueries()
            #expect(queries.count >= 10)
            let world = try E2EWorld()
            defer { world.shutDown() }
            let observed = try ObservedGateway(world)
            let prometheus = try PrometheusInstance(
                scraping: "127.0.0.1:\(observed.gateway.ports.admin)", in: world.directory)
            defer { prometheus.kill() }
            // A scrape before the traffic, so that rates see the counters rise.
            #expect(
                eventually(timeout: .seconds(20), interval: .milliseconds(200)) {
                    ((try? prometheus.query("up == 1")) ?? []).count == 1
                })
            try observed.traffic(storeError: true)
            // Two more scrapes after it.
            let scraped = eventually(timeout: .seconds(20), interval: .milliseconds(250)) {
                let verified = try? prometheus.query(
                    #"sum(increase(attest_gateway_verdicts_total{route="strict",verdict="verified"}[1m])) > 0"#)
                return (verified ?? []).count == 1
            }
            #expect(scraped)
            usleep(1_500_000)
            for (panel, expression) in queries {
                let result = try prometheus.query(expression)
                #expect(!result.isEmpty, "panel \(panel): \(expression) returned no data")
            }
        }
    }
}
