import Foundation
import Testing

extension EndToEnd {
    /// Per-key limits (issue 34) through the built binary and a real Redis: a device over its
    /// rate gets 429 with `Retry-After` while another device on the same route and address
    /// passes; 200 concurrent requests of one key never exceed the bucket; and a verified
    /// request with limits on still costs exactly one Redis command, counted on the server.
    @Suite struct KeyLimits {
        static let routes = """
              - name: api
                match: { path_prefix: /v1/ }
                upstream: api
                mode: enforce
                counter_window: 256
                key_limits: { rate: 1/h, burst: 3 }
              - name: burst
                match: { path_prefix: /burst/ }
                upstream: api
                mode: enforce
                counter_window: 256
                key_limits: { rate: 1/h, burst: 20 }
              - name: roomy
                match: { path_prefix: /roomy/ }
                upstream: api
                mode: enforce
                key_limits: { rate: 1000/s, burst: 1000, daily_quota: 100000 }
            """

        @Test(.timeLimit(.minutes(1)))
        func aDeviceOverItsRateIsRefusedWhileAnotherOnTheSameAddressPasses() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", routes: Self.routes)
            let busy = try world.app()
            let quiet = try world.app()
            #expect(try busy.attest(with: gateway).status == 201)
            #expect(try quiet.attest(with: gateway).status == 201)

            for counter in UInt32(1)...3 {
                expectVerified(try busy.send("GET", "/v1/items", to: gateway), app: busy, counter: counter)
            }
            let refused = try busy.send("GET", "/v1/items", to: gateway)
            expectDenied(refused, 429, "key_rate_limited")
            let retryAfter = Int(refused.header("Retry-After") ?? "") ?? 0
            #expect((3500...3600).contains(retryAfter), "an hour to the next token: \(refused)")

            // Same route, same client address (127.0.0.1), another key: its own bucket.
            expectVerified(try quiet.send("GET", "/v1/items", to: gateway), app: quiet, counter: 1)

            let metrics = try gateway.metrics()
            #expect(metrics["attest_gateway_key_limit_refusals_total{route=\"api\",limit=\"rate\"}"] == 1)
            #expect(try gateway.verdictCount(route: "api", verdict: "rate_limited") == 1)
            #expect(try gateway.verdictCount(route: "api", verdict: "verified") == 4)
        }

        @Test(.timeLimit(.minutes(1)))
        func twoHundredConcurrentRequestsOfOneKeyNeverExceedTheBucket() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", extra: E2EWorld.raceLimits, routes: Self.routes)
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)
            let upstreamBefore = try world.upstream.requestCount()
            let requests = try (1...200).map { index in
                let target = "/burst/\(index)"
                return HTTPRequest(
                    port: gateway.ports.proxy, "GET", target,
                    headers: app.headers(assertion: try app.assertion(method: "GET", target: target)))
            }
            var passed = 0
            var limited = 0
            var other: [String] = []
            for result in HTTPClient.sendAll(requests, timeout: .seconds(45)) {
                switch result {
                case .success(let response) where response.status == 200: passed += 1
                case .success(let response) where response.status == 429 && response.errorCode == "key_rate_limited":
                    limited += 1
                case .success(let response): other.append("\(response)")
                case .failure(let error): other.append("\(error)")
                }
            }
            #expect(other.isEmpty, "unexpected outcomes: \(other.prefix(5))")
            #expect(passed == 20, "the burst, exactly")
            #expect(limited == 180)
            #expect(try world.upstream.requestCount() - upstreamBefore == 20)
        }

        /// `INFO commandstats` on the real server before and after N verified requests (the key
        /// already cached by the gateway): the gateway sent N commands, each the counter script.
        @Test(.timeLimit(.minutes(1)))
        func aVerifiedRequestWithLimitsCostsOneRedisCommand() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", routes: Self.routes)
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)
            // The first request fetches the key (once per key and process) and loads the script.
            expectVerified(try app.send("GET", "/roomy/warm", to: gateway), app: app, counter: 1)

            let before = try Self.commandCalls(world)
            let total = 25
            for index in 0..<total {
                #expect(try app.send("GET", "/roomy/\(index)", to: gateway).status == 200)
            }
            let after = try Self.commandCalls(world)
            var delta: [String: Int] = [:]
            for (command, calls) in after where command != "info" {
                let moved = calls - (before[command] ?? 0)
                if moved != 0 { delta[command] = moved }
            }
            // PING is the store's health check, on its own schedule, not the request path.
            // commandstats also counts the commands a script runs: HMGET, TIME and HSET are the
            // counter script's own, inside the one EVALSHA the gateway sent per request.
            let perRequest = delta.filter { $0.key != "ping" }
            #expect(
                perRequest == ["evalsha": total, "hmget": total, "time": total, "hset": total],
                "commands during \(total) verified requests: \(delta)")
        }

        /// `cmdstat_<name>:calls=N,...` of `INFO commandstats`, by command name.
        static func commandCalls(_ world: E2EWorld) throws -> [String: Int] {
            let run = try ToolRun.run(
                try E2EPaths.executable("redis-cli"), ["-p", String(world.redis.port), "INFO", "commandstats"],
                in: world.directory)
            var calls: [String: Int] = [:]
            for line in run.stdout.split(whereSeparator: \.isNewline) where line.hasPrefix("cmdstat_") {
                let name = line.dropFirst("cmdstat_".count).prefix { $0 != ":" }
                guard let field = line.split(separator: ",").first, let equals = field.firstIndex(of: "="),
                    let count = Int(field[field.index(after: equals)...])
                else { continue }
                calls[String(name).lowercased()] = count
            }
            guard !calls.isEmpty else { throw E2EError("INFO commandstats: \(run.stdout) \(run.stderr)") }
            return calls
        }
    }
}
