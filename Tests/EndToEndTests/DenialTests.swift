import Foundation
import Simulator
import Testing
import Verification

extension EndToEnd {
    /// Must show 2: every way an assertion can be wrong is refused with its own code on an
    /// enforce route, and forwarded with `X-App-Attest-Status: failed; reason=<code>` on a
    /// monitor route. Nothing refused reaches the upstream.
    ///
    /// Two gateways share one Redis: `prod` (environment production, the one under test) and
    /// `dev` (environment development, challenge_ttl_seconds 1) where a development key is
    /// attested and where challenges expire after a second.
    @Suite struct Denials {
        @Test(.timeLimit(.minutes(1)))
        func eachBadAssertionHasItsOwnCode() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let prod = try world.startGateway("prod", routes: TestRoutes.standard)
            let dev = try world.startGateway(
                "dev",
                environment: "development",
                challengeTTLSeconds: 1,
                routes: TestRoutes.standard
            )

            let app = try world.app()
            #expect(try app.attest(with: prod).status == 201)
            let body = Array(#"{"item":"sku-42","quantity":1}"#.utf8)
            var forwarded = 0  // requests the upstream should have seen, counted as they are sent

            // Challenges from `dev` (TTL 1 s) fetched first, so one wait covers both later.
            let devApp = try world.app(environment: .development)
            #expect(try devApp.attest(with: dev).status == 201)
            let expiring = (
                enforce: try devApp.fetchChallenge(from: dev), monitor: try devApp.fetchChallenge(from: dev)
            )
            let expiredAt = ContinuousClock.now + .milliseconds(2200)

            for (route, enforce) in [("/v1/orders", true), ("/watch/orders", false)] {
                func check(
                    _ response: HTTPResponse,
                    _ status: Int,
                    _ code: String,
                    sourceLocation: SourceLocation = #_sourceLocation
                ) {
                    if enforce {
                        expectDenied(response, status, code, sourceLocation: sourceLocation)
                    } else {
                        expectFlagged(response, code, sourceLocation: sourceLocation)
                        forwarded += 1
                    }
                }

                // Replayed assertion: the first use passes, the same assertion again does not.
                let first = try app.assertion(method: "POST", target: route, body: body)
                expectVerified(
                    try prod.request("POST", route, headers: app.headers(assertion: first), body: body),
                    app: app
                )
                forwarded += 1
                check(
                    try prod.request("POST", route, headers: app.headers(assertion: first), body: body),
                    401,
                    "counter_replay"
                )

                // A fresh signature whose counter does not increase (equal, then lower).
                let equal = try app.assertion(method: "POST", target: route, body: body, counter: app.counter)
                check(
                    try prod.request("POST", route, headers: app.headers(assertion: equal), body: body),
                    401,
                    "counter_replay"
                )
                let lower = try app.assertion(method: "POST", target: route, body: body, counter: 1)
                check(
                    try prod.request("POST", route, headers: app.headers(assertion: lower), body: body),
                    401,
                    "counter_replay"
                )

                // Tampering: signed for one request, sent as another.
                let forPost = try app.assertion(method: "POST", target: route, body: body)
                check(
                    try prod.request("PUT", route, headers: app.headers(assertion: forPost), body: body),
                    401,
                    "invalid_signature"
                )
                let forPath = try app.assertion(method: "POST", target: route, body: body)
                check(
                    try prod.request("POST", route + "x", headers: app.headers(assertion: forPath), body: body),
                    401,
                    "invalid_signature"
                )
                let forQuery = try app.assertion(method: "GET", target: route + "?quantity=1")
                check(
                    try prod.request("GET", route + "?quantity=100", headers: app.headers(assertion: forQuery)),
                    401,
                    "invalid_signature"
                )
                let forBody = try app.assertion(method: "POST", target: route, body: body)
                check(
                    try prod.request(
                        "POST",
                        route,
                        headers: app.headers(assertion: forBody),
                        body: #"{"item":"sku-42","quantity":100}"#
                    ),
                    401,
                    "invalid_signature"
                )

                // Wrong key: signed by another device's key, sent under the attested key ID.
                var wrongKey = AssertionOptions()
                wrongKey.signingDevice = try SimulatedDevice.generate()
                let forged = try app.assertion(method: "POST", target: route, body: body, options: wrongKey)
                check(
                    try prod.request("POST", route, headers: app.headers(assertion: forged), body: body),
                    401,
                    "invalid_signature"
                )

                // Unknown key: a well-formed assertion by a key never attested.
                let stranger = try world.app()
                let unknown = try stranger.assertion(method: "POST", target: route, body: body)
                check(
                    try prod.request("POST", route, headers: stranger.headers(assertion: unknown), body: body),
                    401,
                    "unknown_key"
                )

                // Signed for another App ID (the authenticator data's rpIdHash).
                var otherApp = AssertionOptions()
                otherApp.rpIDHash = SHA256.hash(Array("ZZZZZ99999.com.other.app".utf8))
                let foreign = try app.assertion(method: "POST", target: route, body: body, options: otherApp)
                check(
                    try prod.request("POST", route, headers: app.headers(assertion: foreign), body: body),
                    401,
                    "app_id_mismatch"
                )

                // No assertion; an assertion that is not base64.
                check(try prod.request("POST", route, body: body), 401, "assertion_missing")
                check(
                    try prod.request("POST", route, headers: app.headers(assertion: "%%%not-base64%%%"), body: body),
                    401,
                    "malformed_assertion"
                )

                // A development key under this production policy.
                let devAssertion = try devApp.assertion(method: "POST", target: route, body: body)
                check(
                    try prod.request("POST", route, headers: devApp.headers(assertion: devAssertion), body: body),
                    401,
                    "environment_mismatch"
                )
            }

            // Challenge-bound routes: a challenge is used once; a missing one is 428.
            for (route, enforce) in [("/v1/premium/report", true), ("/watch/premium/report", false)] {
                let challenge = try app.fetchChallenge(from: prod)
                let good = try app.assertion(method: "GET", target: route, challenge: challenge)
                expectVerified(
                    try prod.request("GET", route, headers: app.headers(assertion: good, challenge: challenge)),
                    app: app
                )
                forwarded += 1
                let reuse = try app.assertion(method: "GET", target: route, challenge: challenge)
                let reused = try prod.request(
                    "GET",
                    route,
                    headers: app.headers(assertion: reuse, challenge: challenge)
                )
                let none = try app.assertion(method: "GET", target: route)
                let missing = try prod.request("GET", route, headers: app.headers(assertion: none))
                if enforce {
                    expectDenied(reused, 401, "challenge_invalid")
                    expectDenied(missing, 428, "challenge_missing")
                } else {
                    expectFlagged(reused, "challenge_invalid")
                    expectFlagged(missing, "challenge_missing")
                    forwarded += 2
                }
            }

            // Revoked key: passes, then the operator revokes it with the CLI (same Redis).
            let revokedApp = try world.app()
            #expect(try revokedApp.attest(with: prod).status == 201)
            expectVerified(try revokedApp.send("GET", "/v1/me", to: prod), app: revokedApp, counter: 1)
            forwarded += 1
            let revoke = try world.runGateway(["keys", "revoke", revokedApp.keyID, "--redis", world.redis.url])
            #expect(revoke.status == 0, "\(revoke.stderr)")
            #expect(revoke.stdout.contains(#""status":"revoked""#), "\(revoke.stdout)")
            expectDenied(try revokedApp.send("GET", "/v1/me", to: prod), 401, "revoked_key")
            // Revoking a key nobody attested is an operator error: exit 1, said on stderr.
            let stranger = try world.app()
            let notFound = try world.runGateway(["keys", "revoke", stranger.keyID, "--redis", world.redis.url])
            #expect(notFound.status == 1)
            #expect(notFound.stderr.contains("no attested key"), "\(notFound.stderr)")
            expectFlagged(try revokedApp.send("GET", "/watch/me", to: prod), "revoked_key")
            forwarded += 1
            expectDenied(try revokedApp.send("GET", "/v1/me", to: prod), 401, "revoked_key")

            // Expired challenges (dev: challenge_ttl_seconds 1), with the development key there.
            sleep(until: expiredAt)
            let late = try devApp.assertion(method: "GET", target: "/v1/premium/x", challenge: expiring.enforce)
            expectDenied(
                try dev.request(
                    "GET",
                    "/v1/premium/x",
                    headers: devApp.headers(assertion: late, challenge: expiring.enforce)
                ),
                401,
                "challenge_invalid"
            )
            let lateWatch = try devApp.assertion(method: "GET", target: "/watch/premium/x", challenge: expiring.monitor)
            expectFlagged(
                try dev.request(
                    "GET",
                    "/watch/premium/x",
                    headers: devApp.headers(assertion: lateWatch, challenge: expiring.monitor)
                ),
                "challenge_invalid"
            )
            forwarded += 1
            // Still good on dev where development keys belong (the key itself is fine).
            expectVerified(try devApp.send("GET", "/v1/ok", to: dev), app: devApp)
            forwarded += 1

            // A development key cannot even attest against a production gateway.
            let devAttest = try world.app(environment: .development).attest(with: prod)
            expectDenied(devAttest, 403, "environment_mismatch")
            // An expired/unknown challenge at the attest endpoint.
            let latecomer = try world.app()
            let bogus = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
            expectDenied(
                try prod.request(
                    "POST",
                    "/app-attest/attest",
                    body: SimulatedApp.attestBody(
                        keyID: latecomer.keyID,
                        attestation: try latecomer.attestationObject(challenge: bogus),
                        challenge: bogus
                    )
                ),
                401,
                "challenge_invalid"
            )

            // An attestation replayed over a new challenge; an attestation for another App ID;
            // the endpoints are POST only.
            let replayer = try world.app()
            let oldChallenge = try replayer.fetchChallenge(from: prod)
            let oldObject = try replayer.attestationObject(challenge: oldChallenge)
            let newChallenge = try replayer.fetchChallenge(from: prod)
            expectDenied(
                try prod.request(
                    "POST",
                    "/app-attest/attest",
                    body: SimulatedApp.attestBody(
                        keyID: replayer.keyID,
                        attestation: oldObject,
                        challenge: newChallenge
                    )
                ),
                401,
                "nonce_mismatch"
            )
            let foreignApp = try SimulatedApp(
                authority: world.authority,
                appID: "ZZZZZ99999.com.other.app",
                environment: .production
            )
            expectDenied(try foreignApp.attest(with: prod), 403, "app_id_mismatch")
            let getChallenge = try prod.request("GET", "/app-attest/challenge")
            expectDenied(getChallenge, 405, "method_not_allowed")
            #expect(getChallenge.header("Allow") == "POST")
            expectDenied(try prod.request("POST", "/app-attest/attest", body: "{not json"), 400, "malformed_request")

            // Only verified and monitor-flagged requests reached the upstream.
            #expect(try world.upstream.requestCount() == forwarded)

            // Must show 6: the verdict counters these flows moved, per route.
            let metrics = try prod.metrics()
            func verdicts(_ route: String, _ verdict: String) -> Double? {
                metrics["attest_gateway_verdicts_total{route=\"\(route)\",verdict=\"\(verdict)\"}"]
            }
            for route in ["api", "watch"] {
                #expect(verdicts(route, "counter_replay") == 3, "\(route)")
                #expect(verdicts(route, "invalid_signature") == 5, "\(route)")
                #expect(verdicts(route, "unknown_key") == 1, "\(route)")
                #expect(verdicts(route, "missing") == 1, "\(route)")
                #expect(verdicts(route, "malformed") == 1, "\(route)")
                #expect(verdicts(route, "environment_mismatch") == 1, "\(route)")
                #expect(verdicts(route, "app_id_mismatch") == 1, "\(route)")
            }
            #expect(verdicts("api", "verified") == 2)
            #expect(verdicts("api", "revoked_key") == 2)
            #expect(verdicts("watch", "revoked_key") == 1)
            for route in ["premium", "watch_premium"] {
                #expect(verdicts(route, "verified") == 1, "\(route)")
                #expect(verdicts(route, "challenge_invalid") == 1, "\(route)")
                #expect(verdicts(route, "missing") == 1, "\(route)")
            }
            #expect(metrics[#"attest_gateway_attestations_total{result="environment_mismatch"}"#] == 1)
            #expect(metrics[#"attest_gateway_attestations_total{result="challenge_invalid"}"#] == 1)
            #expect(metrics[#"attest_gateway_attestations_total{result="nonce_mismatch"}"#] == 1)
            #expect(metrics[#"attest_gateway_attestations_total{result="app_id_mismatch"}"#] == 1)
            #expect(metrics[#"attest_gateway_attestations_total{result="verified"}"#] == 2)
            let devMetrics = try dev.metrics()
            #expect(devMetrics[#"attest_gateway_verdicts_total{route="premium",verdict="challenge_invalid"}"#] == 1)
            #expect(
                devMetrics[#"attest_gateway_verdicts_total{route="watch_premium",verdict="challenge_invalid"}"#] == 1
            )
        }
    }
}
