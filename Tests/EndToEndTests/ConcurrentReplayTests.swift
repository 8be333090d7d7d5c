import Foundation
import Testing

extension EndToEnd {
    /// Must show 3: one assertion sent 1,000 times at once, spread over two gateway processes
    /// that share one Redis, gets through exactly once (the counter advance is one atomic
    /// compare-and-set in Redis, not a per-process check).
    @Suite struct ConcurrentReplay {
        /// `warm`: each gateway has verified a request of the key before (its key cache holds
        /// the key and counter); cold: the burst is the key's first use, so every request also
        /// fetches the key record from Redis.
        @Test(.timeLimit(.minutes(1)), arguments: [true, false])
        func oneAssertionThousandConcurrentRequestsTwoGatewaysExactlyOnePasses(warm: Bool) throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateways = [
                try world.startGateway("gw-a", extra: E2EWorld.raceLimits, routes: TestRoutes.standard),
                try world.startGateway("gw-b", extra: E2EWorld.raceLimits, routes: TestRoutes.standard),
            ]
            let app = try world.app()
            #expect(try app.attest(with: gateways[0]).status == 201)
            let warmUps = warm ? 1 : 0
            if warm {
                // Counters 1 and 2, one through each gateway.
                expectVerified(try app.send("GET", "/v1/warm", to: gateways[0]), app: app, counter: 1)
                expectVerified(try app.send("GET", "/v1/warm", to: gateways[1]), app: app, counter: 2)
            }
            let burstCounter = app.counter + 1
            let upstreamBefore = try world.upstream.requestCount()

            let body = Array(#"{"transfer":100}"#.utf8)
            let assertion = try app.assertion(method: "POST", target: "/v1/transfers", body: body)
            let total = 1000
            let requests = (0..<total).map { index in
                HTTPRequest(
                    port: gateways[index % 2].ports.proxy,
                    "POST",
                    "/v1/transfers",
                    headers: app.headers(assertion: assertion),
                    body: body
                )
            }
            let results = HTTPClient.sendAll(requests, timeout: .seconds(45))

            var passed: [Int] = []
            var replays = 0
            var other: [String] = []
            for (index, result) in results.enumerated() {
                switch result {
                case .success(let response) where response.status == 200:
                    passed.append(index)
                    expectVerified(response, app: app, counter: burstCounter)
                case .success(let response) where response.status == 401 && response.errorCode == "counter_replay":
                    replays += 1
                case .success(let response):
                    other.append("#\(index): \(response)")
                case .failure(let error):
                    other.append("#\(index): \(error)")
                }
            }
            #expect(other.isEmpty, "unexpected outcomes: \(other.prefix(5))")
            #expect(passed.count == 1, "passed: \(passed)")
            #expect(replays == total - 1)
            // The upstream saw exactly one of them.
            #expect(try world.upstream.requestCount() - upstreamBefore == 1)

            // Both gateways took their half, and together verified it once.
            var verified = 0
            for gateway in gateways {
                let ok = try gateway.verdictCount(route: "api", verdict: "verified")
                let replayed = try gateway.verdictCount(route: "api", verdict: "counter_replay")
                #expect(ok - warmUps + replayed == total / 2, "\(gateway.name): \(ok) verified, \(replayed) replays")
                verified += ok - warmUps
            }
            #expect(verified == 1)

            let show = try world.runGateway(["keys", "show", app.keyID, "--redis", world.redis.url])
            #expect(show.stdout.contains("\"counter\":\(burstCounter)"), "\(show.stdout)")
        }

        /// The same key attested 40 times at once (each with its own fresh challenge) through
        /// two gateways: exactly one 201, every other 409 key_already_attested. And a challenge
        /// issued by one gateway is good, once, at the other.
        @Test(.timeLimit(.minutes(1)))
        func concurrentAttestationsOfOneKeyCreateItOnce() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateways = [
                try world.startGateway("gw-a", extra: E2EWorld.raceLimits, routes: TestRoutes.standard),
                try world.startGateway("gw-b", extra: E2EWorld.raceLimits, routes: TestRoutes.standard),
            ]
            let app = try world.app()
            let total = 40
            let requests = try (0..<total).map { index in
                let gateway = gateways[index % 2]
                let challenge = try app.fetchChallenge(from: gateways[(index / 2) % 2])
                return HTTPRequest(
                    port: gateway.ports.proxy,
                    "POST",
                    "/app-attest/attest",
                    body: Array(
                        SimulatedApp.attestBody(
                            keyID: app.keyID,
                            attestation: try app.attestationObject(challenge: challenge),
                            challenge: challenge
                        ).utf8
                    )
                )
            }
            var created = 0
            var conflicts = 0
            for (index, result) in HTTPClient.sendAll(requests, timeout: .seconds(30)).enumerated() {
                guard case .success(let response) = result else {
                    Issue.record("#\(index): \(result)")
                    continue
                }
                if response.status == 201 {
                    created += 1
                } else {
                    expectDenied(response, 409, "key_already_attested")
                    conflicts += 1
                }
            }
            #expect(created == 1)
            #expect(conflicts == total - 1)

            // A challenge from gw-a, used at gw-b: good once; the second use is refused at gw-a.
            let challenge = try app.fetchChallenge(from: gateways[0])
            let first = try app.assertion(method: "GET", target: "/v1/premium/x", challenge: challenge)
            expectVerified(
                try gateways[1].request(
                    "GET",
                    "/v1/premium/x",
                    headers: app.headers(assertion: first, challenge: challenge)
                ),
                app: app,
                counter: 1
            )
            let second = try app.assertion(method: "GET", target: "/v1/premium/x", challenge: challenge)
            expectDenied(
                try gateways[0].request(
                    "GET",
                    "/v1/premium/x",
                    headers: app.headers(assertion: second, challenge: challenge)
                ),
                401,
                "challenge_invalid"
            )
        }
    }
}
