import Foundation
import GatewayTesting
import Glibc
import Synchronization
import Testing

extension EndToEnd {
    /// Must show 5: a bad policies.yaml is refused with its line and field named, by
    /// `check-config`, by `serve` at start, and by a SIGHUP reload (which keeps serving the old
    /// policy and logs why); a good changed file applies on SIGHUP without a restart.
    @Suite struct PolicyReload {
        static func routes(featureMode: String, featureKey: String = "mode") -> String {
            """
              - name: api
                match: { path_prefix: /v1/ }
                upstream: api
                mode: enforce
              - name: feature
                match: { path_prefix: /feature }
                upstream: api
                \(featureKey): \(featureMode)
            """
        }

        /// 1-based line and column of the first occurrence of `needle` in `text`.
        static func position(of needle: String, in text: String) throws -> (line: Int, column: Int) {
            for (index, line) in text.components(separatedBy: "\n").enumerated() {
                if let range = line.range(of: needle) {
                    return (index + 1, line.distance(from: line.startIndex, to: range.lowerBound) + 1)
                }
            }
            throw E2EError("\(needle) is not in the policy")
        }

        @Test(.timeLimit(.minutes(1)))
        func badPolicyRefusedEverywhereGoodPolicyAppliedOnSIGHUP() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }

            // check-config and serve refuse a bad value, naming file, line, column and field.
            let ports = GatewayPorts(proxy: try freeServerPort(), admin: try freeServerPort())
            let badText = world.policy(ports: ports, routes: Self.routes(featureMode: "enfroce"))
            let badPath = try world.directory.write("bad.yaml", badText)
            let (line, column) = try Self.position(of: "enfroce", in: badText)
            let expected = "\(badPath):\(line):\(column): routes[1].mode:"

            let check = try world.runGateway(["check-config", badPath])
            #expect(check.status == 2)
            #expect(check.stderr.contains(expected), "check-config said: \(check.stderr)")
            #expect(check.stderr.contains("enfroce"))
            #expect(check.stdout.isEmpty)

            let serve = try world.runGateway(["serve", "--config", badPath])
            #expect(serve.status == 2)
            #expect(serve.stderr.contains(expected), "serve said: \(serve.stderr)")

            // A good policy: check-config prints the routes; serve starts with /feature off.
            let gateway = try world.startGateway("gw", routes: Self.routes(featureMode: "off"))
            let good = try world.runGateway(["check-config", gateway.policyPath])
            #expect(good.status == 0, "\(good.stderr)")
            #expect(good.stdout.contains("feature") && good.stdout.contains("api"), "\(good.stdout)")
            // A keep-alive client connection opened under the old policy, kept across reloads.
            let persistent = try KeepAliveConnection(port: gateway.ports.proxy)
            let before = try persistent.send("GET", "/feature/x")
            #expect(before.status == 200)
            #expect(try UpstreamEcho(before).appHeaders == ["x-app-attest-status": ["skipped"]])

            // SIGHUP with a bad file (an unknown key): logged with line and field; the old policy stays.
            let unknownKeyText = world.policy(
                ports: gateway.ports,
                routes: Self.routes(featureMode: "enforce", featureKey: "moed")
            )
            let unknownLine = try Self.position(of: "moed", in: unknownKeyText).line
            try gateway.reload(with: unknownKeyText)
            let logged = gateway.child.waitForStderr(timeout: .seconds(10)) { $0.contains("policy_reload_failed") }
            #expect(logged, "no policy_reload_failed event: \(gateway.child.stderr.suffix(800))")
            let failure = try #require(gateway.logEvents("policy_reload_failed").first)
            let error = try #require(failure["error"] as? String)
            #expect(error.contains("\(gateway.policyPath):\(unknownLine):"), "\(error)")
            #expect(error.contains("routes[1].moed"), "\(error)")
            #expect(failure["action"] as? String == "kept the running policy")
            #expect(failure["level"] as? String == "error")
            let during = try persistent.send("GET", "/feature/x")
            #expect(during.status == 200, "the old policy should still serve: \(during)")
            #expect(try UpstreamEcho(during).appHeaders == ["x-app-attest-status": ["skipped"]])
            #expect(gateway.child.isRunning)

            // SIGHUP with the file gone (an editor's rename gone wrong): refused the same way.
            try FileManager.default.removeItem(atPath: gateway.policyPath)
            gateway.child.signal(SIGHUP)
            #expect(
                gateway.child.waitForStderr(timeout: .seconds(10)) { _ in
                    gateway.logEvents("policy_reload_failed").count == 2
                }
            )
            #expect(
                (gateway.logEvents("policy_reload_failed").last?["error"] as? String)?.contains(gateway.policyPath)
                    == true
            )
            #expect(try persistent.send("GET", "/feature/x").status == 200)
            let failedMetrics = try gateway.metrics()
            #expect(failedMetrics["attest_gateway_config_last_reload_successful"] == 0)
            #expect(failedMetrics["attest_gateway_config_reloads_total{result=\"failed\"}"] == 2)

            // SIGHUP with a good changed file: /feature switches from off to enforce.
            let reloadsBefore = gateway.logEvents("policy_reloaded").count
            try gateway.reload(with: world.policy(ports: gateway.ports, routes: Self.routes(featureMode: "enforce")))
            let applied = gateway.child.waitForStderr(timeout: .seconds(10)) { _ in
                gateway.logEvents("policy_reloaded").count > reloadsBefore
            }
            #expect(applied, "no policy_reloaded event: \(gateway.child.stderr.suffix(800))")
            let reloadedMetrics = try gateway.metrics()
            #expect(reloadedMetrics["attest_gateway_config_last_reload_successful"] == 1)
            #expect(reloadedMetrics["attest_gateway_config_reloads_total{result=\"ok\"}"] == 1)
            #expect(
                reloadedMetrics["attest_gateway_config_last_reload_success_timestamp_seconds", default: 0]
                    >= Date().timeIntervalSince1970 - 60)
            // /config shows the policy now in force.
            let config = try gateway.admin("/config")
            #expect(config.status == 200)
            #expect(
                config.bodyText.contains("feature") && config.bodyText.contains("mode=enforce"), "\(config.bodyText)")
            expectDenied(try gateway.request("GET", "/feature/x"), 401, "assertion_missing")
            // ... also on the connection opened before the reload.
            expectDenied(try persistent.send("GET", "/feature/x"), 401, "assertion_missing")
            // The store survived the reload: a key attested now works on the new route.
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)
            expectVerified(try app.send("GET", "/feature/x", to: gateway), app: app, counter: 1)

            // Must show 6: the verdicts these flows moved (off twice, then enforce).
            #expect(try gateway.verdictCount(route: "feature", verdict: "skipped") == 3)
            #expect(try gateway.verdictCount(route: "feature", verdict: "missing") == 2)
            #expect(try gateway.verdictCount(route: "feature", verdict: "verified") == 1)
            #expect(gateway.child.isRunning)
        }

        /// SIGHUP while 400 requests are in flight: every one is answered, by the old policy
        /// (`/feature` off: forwarded, skipped) or the new one (enforce: 401 assertion_missing),
        /// and once the reload is logged every request gets the new one.
        @Test(.timeLimit(.minutes(1)))
        func reloadUnderLoadAnswersEveryRequest() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", routes: Self.routes(featureMode: "off"))
            let newPolicy = world.policy(ports: gateway.ports, routes: Self.routes(featureMode: "enforce"))
            let requests = (0..<400).map { HTTPRequest(port: gateway.ports.proxy, "GET", "/feature/\($0)") }
            let results = Mutex<[Result<HTTPResponse, HTTPClientError>]>([])
            let burst = Thread {
                let answered = HTTPClient.sendAll(requests, timeout: .seconds(30))
                results.withLock { $0 = answered }
            }
            burst.start()
            usleep(20_000)
            try gateway.reload(with: newPolicy)
            let applied = gateway.child.waitForStderr(timeout: .seconds(10)) { $0.contains("policy_reloaded") }
            #expect(applied)
            let finished = eventually(timeout: .seconds(40)) { results.withLock { $0.count } == requests.count }
            #expect(finished, "the burst did not finish")

            var old = 0
            var new = 0
            for (index, result) in results.withLock({ $0 }).enumerated() {
                guard case .success(let response) = result else {
                    Issue.record("#\(index): no answer: \(result)")
                    continue
                }
                if response.status == 200 {
                    #expect(try UpstreamEcho(response).appHeaders == ["x-app-attest-status": ["skipped"]])
                    old += 1
                } else {
                    expectDenied(response, 401, "assertion_missing")
                    new += 1
                }
            }
            #expect(old + new == requests.count, "old \(old), new \(new)")
            expectDenied(try gateway.request("GET", "/feature/after"), 401, "assertion_missing")
            #expect(try gateway.verdictCount(route: "feature", verdict: "skipped") == old)
            #expect(try gateway.verdictCount(route: "feature", verdict: "missing") == new + 1)
        }

        /// A reload that names another Redis switches the store: keys attested in the old one
        /// are unknown there, /readyz follows the new one, and the old one is no longer needed.
        @Test(.timeLimit(.minutes(1)))
        func reloadToAnotherRedisSwitchesTheStore() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let other = try RedisInstance.start(in: world.directory)
            defer { other.kill() }
            let gateway = try world.startGateway("gw", routes: Self.routes(featureMode: "enforce"))
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)
            expectVerified(try app.send("GET", "/v1/a", to: gateway), app: app, counter: 1)

            try gateway.reload(
                with: world.policy(
                    ports: gateway.ports,
                    redisURL: other.url,
                    routes: Self.routes(featureMode: "enforce")
                )
            )
            #expect(gateway.child.waitForStderr(timeout: .seconds(10)) { $0.contains("policy_reloaded") })
            expectDenied(try app.send("GET", "/v1/b", to: gateway), 401, "unknown_key")
            world.redis.kill()
            #expect(eventually(timeout: .seconds(5)) { (try? gateway.admin("/readyz"))?.status == 200 })
            let newcomer = try world.app()
            #expect(try newcomer.attest(with: gateway).status == 201)
            expectVerified(try newcomer.send("GET", "/v1/c", to: gateway), app: newcomer, counter: 1)
        }
    }
}
