import Foundation
import GatewayTesting
import Testing
import Verification

extension EndToEnd {
    /// Must show 1: challenge → attest → asserted requests pass; the upstream sees exactly the
    /// gateway's identity headers, never the client's spoofed ones, never the assertion.
    @Suite struct HappyPath {
        @Test(.timeLimit(.minutes(1)))
        func attestThenAssertedRequestsReachTheUpstreamWithIdentityHeaders() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", routes: TestRoutes.standard)
            let app = try world.app()

            // Challenge: 200, 55-character (stateless: version, expiry, nonce, tag) base64url, the policy's TTL, not cacheable.
            let challengeResponse = try gateway.request("POST", "/app-attest/challenge")
            #expect(challengeResponse.status == 200)
            #expect(challengeResponse.header("Content-Type") == "application/json")
            #expect(challengeResponse.header("Cache-Control") == "no-store")
            let challengeJSON = try challengeResponse.json()
            let challenge = try #require(challengeJSON["challenge"] as? String)
            #expect(challenge.count == 55)
            #expect(challenge.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
            #expect(challengeJSON["expires_in"] as? Int == 300)

            // Attest: 201 with the key's identity.
            let attestResponse = try gateway.request(
                "POST",
                "/app-attest/attest",
                headers: [("Content-Type", "application/json")],
                body: SimulatedApp.attestBody(
                    keyID: app.keyID,
                    attestation: try app.attestationObject(challenge: challenge),
                    challenge: challenge
                )
            )
            #expect(attestResponse.status == 201, "\(attestResponse)")
            let attested = try attestResponse.json()
            #expect(attested["key_id"] as? String == app.keyID)
            #expect(attested["app_id"] as? String == TestPolicy.appID)
            #expect(attested["environment"] as? String == "production")

            // The same key again: 409 key_already_attested (a key is attested once).
            let again = try app.attest(with: gateway)
            #expect(again.status == 409)
            #expect(again.errorCode == "key_already_attested")

            // Asserted POST with a body, plus every kind of spoofed identity header.
            let body = Array(#"{"item":"sku-42","quantity":1}"#.utf8)
            let target = "/v1/orders?coupon=SPRING&x=%2F"
            let assertion = try app.assertion(method: "POST", target: target, body: body)
            let spoofed: [(String, String)] = [
                ("X-App-Attest-Status", "verified"),
                ("X-App-Attest-App-Id", "FORGED1234.com.evil.app"),
                ("X-App-Attest-Environment", "development"),
                ("X-App-Attest-Counter", "4000000000"),
            ]
            // A name in the gateway's namespace that is none of its headers is refused, not
            // stripped: a check-only proxy could not overwrite it (issue 29).
            for unknown in ["x-app-attest-key-id-extra", "X-APP-ATTEST-ANYTHING"] {
                let refused = try gateway.request("GET", "/v1/orders", headers: [(unknown, "spoof")])
                #expect(refused.status == 400, "\(refused)")
                #expect(String(decoding: refused.body, as: UTF8.self).contains("unknown_gateway_header"))
            }
            let response = try gateway.request(
                "POST",
                target,
                headers: app.headers(assertion: assertion) + spoofed + [("Content-Type", "application/json")],
                body: body
            )
            #expect(response.status == 200, "\(response)")
            let echo = try UpstreamEcho(response)
            #expect(echo.method == "POST")
            #expect(echo.target == target)
            #expect(echo.bodySHA256 == SHA256.hash(body).map { String(format: "%02x", $0) }.joined())
            #expect(
                echo.appHeaders == [
                    "x-app-attest-status": ["verified"],
                    "x-app-attest-key-id": [app.keyID],
                    "x-app-attest-app-id": [TestPolicy.appID],
                    "x-app-attest-environment": ["production"],
                    "x-app-attest-counter": ["1"],
                ]
            )
            #expect(echo.values("X-App-Assertion").isEmpty)
            #expect(echo.values("X-Forwarded-For") == ["127.0.0.1"])

            // A second request (GET, no body), then a challenge-bound one: counters 2 and 3.
            let second = try app.send("GET", "/v1/profile?fields=name,email", to: gateway)
            #expect(second.status == 200, "\(second)")
            #expect(try UpstreamEcho(second).values("X-App-Attest-Counter") == ["2"])

            let bound = try app.send("GET", "/v1/premium/report?month=2026-11", challengeRequired: true, to: gateway)
            #expect(bound.status == 200, "\(bound)")
            let boundEcho = try UpstreamEcho(bound)
            #expect(boundEcho.appHeaders["x-app-attest-status"] == ["verified"])
            #expect(boundEcho.appHeaders["x-app-attest-counter"] == ["3"])
            // The challenge header is the client's: stripped like every X-App-Attest-* header.
            #expect(boundEcho.values("X-App-Attest-Challenge").isEmpty)

            // An off route: forwarded unverified, spoofed headers still stripped.
            let open = try gateway.request("GET", "/public/hello", headers: spoofed + [("X-App-Assertion", "AAAA")])
            #expect(open.status == 200)
            #expect(try UpstreamEcho(open).appHeaders == ["x-app-attest-status": ["skipped"]])

            // Exactly these four reached the upstream.
            #expect(try world.upstream.requestCount() == 4)

            // The key record the requests left behind, read with the operator's CLI.
            let show = try world.runGateway(["keys", "show", app.keyID, "--redis", world.redis.url])
            #expect(show.status == 0, "\(show.stderr)")
            let record = try #require(try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
            #expect(record["counter"] as? Int == 3)
            #expect(record["status"] as? String == "active")
            #expect(record["environment"] as? String == "production")

            // Must show 6: /metrics counts these verdicts; the access log has one line each.
            let metrics = try gateway.metrics()
            #expect(metrics[#"attest_gateway_verdicts_total{route="api",verdict="verified"}"#] == 2)
            #expect(metrics[#"attest_gateway_verdicts_total{route="premium",verdict="verified"}"#] == 1)
            #expect(metrics[#"attest_gateway_verdicts_total{route="public",verdict="skipped"}"#] == 1)
            #expect(metrics[#"attest_gateway_attestations_total{result="verified"}"#] == 1)
            #expect(metrics[#"attest_gateway_attestations_total{result="key_already_attested"}"#] == 1)
            #expect(metrics[#"attest_gateway_challenges_issued_total"#] == 3)
            #expect(metrics[#"attest_gateway_requests_total{route="api",status="2xx"}"#] == 2)
            #expect(metrics[#"attest_gateway_requests_total{route="_attest",status="4xx"}"#] == 1)
            #expect(metrics[#"attest_gateway_request_duration_seconds_count{route="premium"}"#] == 1)
            // The access log reaches stdout per 16 KiB or per 100 ms tick: wait for the lines.
            var verifiedLines: [[String: Any]] = []
            let logged = eventually(timeout: .seconds(3)) {
                verifiedLines = gateway.accessLog.filter {
                    $0["verdict"] as? String == "verified" && $0["route"] as? String == "api"
                }
                return verifiedLines.count >= 2
            }
            #expect(logged && verifiedLines.count == 2, "access log lines: \(verifiedLines.count)")
            #expect(verifiedLines.allSatisfy { $0["key_id"] as? String == String(app.keyID.prefix(8)) })
        }

        /// `binding: body` (Apple's sample): the assertion signs the raw body, whose JSON field
        /// `nonce` carries the challenge. Method and path are not covered; the body and the
        /// challenge are.
        @Test(.timeLimit(.minutes(1)))
        func bodyBindingRouteAsInApplesSample() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let routes = """
                  - name: legacy
                    match: { path_prefix: /legacy }
                    upstream: api
                    mode: enforce
                    binding: body
                    challenge: required
                    challenge_field: nonce
                """
            let gateway = try world.startGateway("gw", routes: routes)
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)

            let challenge = try app.fetchChallenge(from: gateway)
            let body = Array(#"{"nonce":"\#(challenge)","level":7}"#.utf8)
            let assertion = try app.assertion(clientData: body)
            // Signed over the body only: another method or path with the same body passes.
            let response = try gateway.request(
                "PUT",
                "/legacy/scores?any=thing",
                headers: app.headers(assertion: assertion),
                body: body
            )
            expectVerified(response, app: app, counter: 1)
            #expect(
                try UpstreamEcho(response).bodySHA256 == SHA256.hash(body).map { String(format: "%02x", $0) }.joined()
            )

            // The same challenge again, freshly signed: used already.
            let again = try app.assertion(clientData: body)
            expectDenied(
                try gateway.request("POST", "/legacy/scores", headers: app.headers(assertion: again), body: body),
                401,
                "challenge_invalid"
            )
            // A body changed after signing.
            let fresh = try app.fetchChallenge(from: gateway)
            let signedBody = Array(#"{"nonce":"\#(fresh)","level":7}"#.utf8)
            let signed = try app.assertion(clientData: signedBody)
            let tampered = Array(#"{"nonce":"\#(fresh)","level":99}"#.utf8)
            expectDenied(
                try gateway.request("POST", "/legacy/scores", headers: app.headers(assertion: signed), body: tampered),
                401,
                "invalid_signature"
            )
            // No challenge field in the body.
            let bare = Array(#"{"level":7}"#.utf8)
            let unbound = try app.assertion(clientData: bare)
            expectDenied(
                try gateway.request("POST", "/legacy/scores", headers: app.headers(assertion: unbound), body: bare),
                428,
                "challenge_missing"
            )
            #expect(try world.upstream.requestCount() == 1)
        }
    }
}
