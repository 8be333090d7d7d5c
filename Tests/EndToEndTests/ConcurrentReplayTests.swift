import Foundation
import Testing

extension EndToEnd {
    /// Must show 3: one assertion sent 1,000 times at once, spread over two gateway processes
    /// that share one Redis, gets through exactly once (the counter advance is one atomic
    /// compare-and-set in Redis, not a per-process check).
    @Suite struct ConcurrentReplay {
        @Test(.timeLimit(.minutes(1)))
        func oneAssertionThousandConcurrentRequestsTwoGatewaysExactlyOnePasses() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateways = [
                try world.startGateway("gw-a", routes: TestRoutes.standard),
                try world.startGateway("gw-b", routes: TestRoutes.standard),
            ]
            let app = try world.app()
            #expect(try app.attest(with: gateways[0]).status == 201)
            // Warm both gateways (Redis connection, upstream pool); counters 1 and 2.
            expectVerified(try app.send("GET", "/v1/warm", to: gateways[0]), app: app, counter: 1)
            expectVerified(try app.send("GET", "/v1/warm", to: gateways[1]), app: app, counter: 2)
            let upstreamBefore = try world.upstream.requestCount()

            let body = Array(#"{"transfer":100}"#.utf8)
            let assertion = try app.assertion(method: "POST", target: "/v1/transfers", body: body)
            let total = 1000
            let requests = (0..<total).map { index in
                HTTPRequest(
                    port: gateways[index % 2].ports.proxy, "POST", "/v1/transfers",
                    headers: app.headers(assertion: assertion), body: body)
            }
            let results = HTTPClient.sendAll(requests, timeout: .seconds(45))

            var passed: [Int] = []
            var replays = 0
            var other: [String] = []
            for (index, result) in results.enumerated() {
                switch result {
                case .success(let response) where response.status == 200:
                    passed.append(index)
                    expectVerified(response, app: app, counter: 3)
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
                #expect(ok - 1 + replayed == total / 2, "\(gateway.name): \(ok) verified, \(replayed) replays")
                verified += ok - 1  // minus the warm-up request
            }
            #expect(verified == 1)

            let show = try world.runGateway(["keys", "show", app.keyID, "--redis", world.redis.url])
            #expect(show.stdout.contains(#""counter":3"#), "\(show.stdout)")
        }
    }
}
