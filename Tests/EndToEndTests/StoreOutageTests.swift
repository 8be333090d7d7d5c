import Foundation
import GatewayTesting
import Synchronization
import Testing

extension EndToEnd {
    /// Must show 4 (and the /readyz half of 6): Redis dies mid-traffic. Fail-closed routes
    /// answer 503 store_error at once, fail-open routes forward flagged as unverified, no
    /// request hangs, /readyz says 503; Redis comes back on the same port and the same gateway
    /// process recovers by itself, with the counters Redis kept (AOF).
    @Suite struct StoreOutage {
        static let routes = """
              - name: strict
                match: { path_prefix: /strict }
                upstream: api
                mode: enforce
                on_store_error: deny
              - name: lenient
                match: { path_prefix: /lenient }
                upstream: api
                mode: enforce
                on_store_error: allow
              - name: watch
                match: { path_prefix: /watch }
                upstream: api
                mode: monitor
              - name: public
                match: { path_prefix: /public }
                upstream: api
                mode: off
            """

        /// Every request the gateway gets is answered within this, store down or not.
        static let answerBound: Duration = .seconds(2)

        struct Outcome: Sendable {
            var route: String
            var sentAfterKill: Bool
            var result: Result<HTTPResponse, HTTPClientError>
        }

        /// Shared by the test and its traffic thread.
        final class TrafficState: Sendable {
            let stop = Atomic<Bool>(false)
            let killed = Atomic<Bool>(false)
            let outcomes = Mutex<[Outcome]>([])
        }

        @Test(.timeLimit(.minutes(1)))
        func redisStoppedMidTrafficThenRestarted() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", routes: Self.routes)
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)
            expectVerified(try app.send("GET", "/strict/a", to: gateway), app: app, counter: 1)
            expectVerified(try app.send("GET", "/lenient/a", to: gateway), app: app, counter: 2)
            let preOutage = try app.assertion(method: "GET", target: "/strict/b")
            expectVerified(
                try gateway.request("GET", "/strict/b", headers: app.headers(assertion: preOutage)),
                app: app,
                counter: 3
            )
            #expect(try gateway.admin("/readyz").status == 200)

            // Traffic on its own thread (it alone uses `app` until joined): one request after
            // another, alternating routes, each a fresh assertion.
            let state = TrafficState()
            let done = DispatchSemaphore(value: 0)
            let traffic = Thread {
                var index = 0
                while !state.stop.load(ordering: .acquiring) {
                    let route = index % 2 == 0 ? "/strict/t" : "/lenient/t"
                    index += 1
                    let afterKill = state.killed.load(ordering: .acquiring)
                    let result: Result<HTTPResponse, HTTPClientError>
                    do {
                        let assertion = try app.assertion(method: "GET", target: route)
                        result =
                            HTTPClient.sendAll(
                                [
                                    HTTPRequest(
                                        port: gateway.ports.proxy,
                                        "GET",
                                        route,
                                        headers: app.headers(assertion: assertion)
                                    )
                                ],
                                timeout: .seconds(10)
                            )[0]
                    } catch {
                        result = .failure(.malformed("could not sign: \(error)"))
                    }
                    state.outcomes.withLock {
                        $0.append(Outcome(route: route, sentAfterKill: afterKill, result: result))
                    }
                    usleep(5_000)
                }
                done.signal()
            }
            traffic.start()
            usleep(500_000)
            world.redis.kill()
            state.killed.store(true, ordering: .releasing)
            usleep(1_500_000)
            state.stop.store(true, ordering: .releasing)
            #expect(done.wait(timeout: .now() + 15) == .success, "the traffic thread did not finish")

            let all = state.outcomes.withLock { $0 }
            #expect(all.filter { !$0.sentAfterKill }.count >= 4, "too little traffic before the kill: \(all.count)")
            var deniedAfterKill = 0
            var flaggedAfterKill = 0
            for outcome in all {
                guard case .success(let response) = outcome.result else {
                    Issue.record("\(outcome.route): no answer: \(outcome.result)")
                    continue
                }
                #expect(response.elapsed < Self.answerBound, "\(outcome.route) took \(response.elapsed)")
                if response.status == 200, let echo = try? UpstreamEcho(response) {
                    let status = echo.appHeaders["x-app-attest-status"] ?? []
                    if status == ["unverified; reason=store_error"] {
                        #expect(outcome.route == "/lenient/t", "a fail-closed route forwarded unverified")
                        #expect(
                            echo.appHeaders.count == 1,
                            "identity headers on an unverified forward: \(echo.appHeaders)"
                        )
                        flaggedAfterKill += 1
                    } else {
                        #expect(status == ["verified"], "\(outcome.route): \(echo.appHeaders)")
                    }
                } else {
                    expectDenied(response, 503, "store_error")
                    #expect(outcome.route == "/strict/t", "a fail-open route refused: \(response)")
                    deniedAfterKill += 1
                }
            }
            #expect(deniedAfterKill >= 1)
            #expect(flaggedAfterKill >= 1)

            // Redis down: each kind of route, answered promptly.
            let strict = try app.send("GET", "/strict/c", to: gateway, timeout: .seconds(5))
            expectDenied(strict, 503, "store_error")
            #expect(strict.elapsed < .seconds(1), "store_error took \(strict.elapsed)")
            let lenient = try app.send("POST", "/lenient/c", body: Array("x".utf8), to: gateway, timeout: .seconds(5))
            #expect(lenient.status == 200)
            #expect(try UpstreamEcho(lenient).appHeaders == ["x-app-attest-status": ["unverified; reason=store_error"]])
            // A monitor route never refuses: forwarded, marked unverified.
            let watched = try app.send("GET", "/watch/c", to: gateway, timeout: .seconds(5))
            #expect(try UpstreamEcho(watched).appHeaders == ["x-app-attest-status": ["unverified; reason=store_error"]])
            let open = try gateway.request("GET", "/public/c")
            #expect(try UpstreamEcho(open).appHeaders == ["x-app-attest-status": ["skipped"]])
            // Challenges are stateless: still issued while Redis is down (redeeming one is not).
            #expect(try gateway.request("POST", "/app-attest/challenge").status == 200)
            let notReady = try gateway.admin("/readyz")
            #expect(notReady.status == 503, "\(notReady)")
            #expect((try notReady.json())["status"] as? String == "not_ready")
            #expect(try gateway.admin("/healthz").status == 200)

            // Same port, same data (AOF): the gateway reconnects on its own.
            try world.redis.restart()
            let recovered = eventually(timeout: .seconds(10)) {
                (try? gateway.admin("/readyz"))?.status == 200
            }
            #expect(recovered, "/readyz did not return to 200 after Redis came back")
            #expect(gateway.child.isRunning)
            expectVerified(try app.send("GET", "/strict/d", to: gateway), app: app, counter: app.counter)
            // Replay protection is back, with the counter Redis kept through the outage.
            expectDenied(
                try gateway.request("GET", "/strict/b", headers: app.headers(assertion: preOutage)),
                401,
                "counter_replay"
            )

            // Redis hung (SIGSTOP): the command timeout (250 ms) bounds the answer.
            world.redis.pause()
            defer { world.redis.resume() }
            let hung = try app.send("GET", "/strict/e", to: gateway, timeout: .seconds(5))
            expectDenied(hung, 503, "store_error")
            #expect(hung.elapsed < .seconds(1), "store_error with a hung Redis took \(hung.elapsed)")
            world.redis.resume()
            let back = eventually(timeout: .seconds(10)) {
                (try? app.send("GET", "/strict/f", to: gateway, timeout: .seconds(5)))?.status == 200
            }
            #expect(back, "no verified request after Redis resumed")

            let metrics = try gateway.metrics()
            #expect(
                (metrics[#"attest_gateway_verdicts_total{route="strict",verdict="store_error"}"#] ?? 0)
                    >= Double(deniedAfterKill + 2)
            )
            #expect(
                (metrics[#"attest_gateway_verdicts_total{route="lenient",verdict="store_error"}"#] ?? 0)
                    >= Double(flaggedAfterKill + 1)
            )
            #expect((metrics[#"attest_gateway_verdicts_total{route="strict",verdict="counter_replay"}"#] ?? 0) == 1)
            let storeErrors = metrics.filter { $0.key.hasPrefix("attest_gateway_store_errors_total") }.values.reduce(
                0,
                +
            )
            #expect(storeErrors >= Double(deniedAfterKill + flaggedAfterKill + 3))
            #expect(!gateway.logEvents("store_error").isEmpty, "no store_error event logged")
        }

        /// A hung Redis (SIGSTOP) under a burst of 300 concurrent requests: each is answered by
        /// the store's command timeout (250 ms) plus scheduling, 503 on the fail-closed route and
        /// forwarded unverified on the fail-open one; /readyz answers 503 within its 1 s ping
        /// timeout; after SIGCONT the gateway verifies again without a restart.
        @Test(.timeLimit(.minutes(1)))
        func hungRedisUnderABurstFailsFastThenRecovers() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", routes: Self.routes)
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)
            expectVerified(try app.send("GET", "/strict/a", to: gateway), app: app, counter: 1)
            expectVerified(try app.send("GET", "/lenient/a", to: gateway), app: app, counter: 2)

            let total = 300
            let requests = try (0..<total).map { index in
                let route = index % 2 == 0 ? "/strict/burst" : "/lenient/burst"
                let assertion = try app.assertion(method: "GET", target: route)
                return HTTPRequest(port: gateway.ports.proxy, "GET", route, headers: app.headers(assertion: assertion))
            }
            world.redis.pause()
            defer { world.redis.resume() }
            let results = HTTPClient.sendAll(requests, timeout: .seconds(20))
            var slowest: Duration = .zero
            for (index, result) in results.enumerated() {
                guard case .success(let response) = result else {
                    Issue.record("#\(index): no answer: \(result)")
                    continue
                }
                slowest = max(slowest, response.elapsed)
                if index % 2 == 0 {
                    expectDenied(response, 503, "store_error")
                } else {
                    #expect(response.status == 200, "#\(index): \(response)")
                    #expect(
                        try UpstreamEcho(response).appHeaders == [
                            "x-app-attest-status": ["unverified; reason=store_error"]
                        ]
                    )
                }
            }
            #expect(slowest < Self.answerBound, "slowest answer took \(slowest)")
            let readiness = try gateway.admin("/readyz")
            #expect(readiness.status == 503, "\(readiness)")
            #expect(readiness.elapsed < Self.answerBound)

            world.redis.resume()
            let back = eventually(timeout: .seconds(10)) {
                (try? app.send("GET", "/strict/after", to: gateway, timeout: .seconds(5)))?.status == 200
            }
            #expect(back, "no verified request after Redis resumed")
            #expect(try gateway.admin("/readyz").status == 200)
            let metrics = try gateway.metrics()
            #expect(
                metrics[#"attest_gateway_verdicts_total{route="strict",verdict="store_error"}"#] == Double(total / 2)
            )
            #expect(
                metrics[#"attest_gateway_verdicts_total{route="lenient",verdict="store_error"}"#] == Double(total / 2)
            )
            let timeouts =
                metrics[#"attest_gateway_store_errors_total{operation="advance_counter",kind="store_timeout"}"#] ?? 0
            #expect(timeouts >= Double(total) * 0.9, "store_timeout count \(timeouts)")
        }

        /// Redis lost its data (FLUSHALL stands in for a restart without persistence): the
        /// gateway's key cache does not keep a vanished key alive, requests get unknown_key (the
        /// app re-attests, docs/operations.md runbook) and a new attestation works at once.
        @Test(.timeLimit(.minutes(1)))
        func keysLostFromRedisAreUnknownEvenWhenCached() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", routes: Self.routes)
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)
            expectVerified(try app.send("GET", "/strict/a", to: gateway), app: app, counter: 1)
            #expect(try world.redis.command("FLUSHALL") == "+OK")
            expectDenied(try app.send("GET", "/strict/b", to: gateway), 401, "unknown_key")
            expectFlagged(try app.send("GET", "/watch/b", to: gateway), "unknown_key")
            let reinstalled = try world.app()
            #expect(try reinstalled.attest(with: gateway).status == 201)
            expectVerified(try reinstalled.send("GET", "/strict/c", to: gateway), app: reinstalled, counter: 1)
        }
    }
}
