import Foundation
import Testing

extension EndToEnd {
    /// Must show 1, beyond the request head: the upstream sees exactly the gateway's identity
    /// headers, whatever else the client tries.
    @Suite struct HeaderSpoofing {
        static let spoofedTrailers: [(String, String)] = [
            ("X-App-Attest-Status", "verified"),
            ("X-App-Attest-Key-Id", "dmljdGltLWtleS1pZA=="),
            ("x-app-attest-app-id", "FORGED1234.com.evil.app"),
            ("X-App-Assertion", "AAAA"),
            ("X-Checksum", "sha256=abc"),
        ]

        /// Identity headers cannot be smuggled in the trailer section of a chunked request (the
        /// CVE-2013-5704 pattern: upstreams that merge trailers into headers would trust them).
        /// Other trailers still pass.
        @Test(.timeLimit(.minutes(1)))
        func spoofedIdentityTrailersNeverReachTheUpstream() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", routes: TestRoutes.standard)
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)
            let body = Array("chunk of an upload".utf8)

            // mode: off streams the body through, trailers included.
            let open = try gateway.request("POST", "/public/upload", body: body, trailers: Self.spoofedTrailers)
            #expect(open.status == 200, "\(open)")
            let openEcho = try UpstreamEcho(open)
            #expect(openEcho.appHeaders == ["x-app-attest-status": ["skipped"]])
            #expect(openEcho.trailers.map(\.0) == ["X-Checksum"], "upstream got trailers \(openEcho.trailers)")

            // enforce and monitor buffer the body to verify it; a verified request's trailers
            // carry nothing that could pass for the gateway's identity headers.
            for route in ["/v1/upload", "/watch/upload"] {
                let assertion = try app.assertion(method: "POST", target: route, body: body)
                let response = try gateway.request(
                    "POST",
                    route,
                    headers: app.headers(assertion: assertion),
                    body: body,
                    trailers: Self.spoofedTrailers
                )
                expectVerified(response, app: app, counter: app.counter)
                let echo = try UpstreamEcho(response)
                #expect(echo.appHeaders["x-app-attest-app-id"] == [TestPolicy.appID])
                #expect(
                    !echo.trailers.contains { $0.0.lowercased().hasPrefix("x-app-") },
                    "\(route): trailers \(echo.trailers)"
                )
            }
        }

        /// `Connection: <name>` makes a proxy drop the named field as hop-by-hop; naming the
        /// identity headers must not remove the ones the gateway itself adds (a monitor route's
        /// `failed; reason=…` flag would vanish, a verified request would lose its identity).
        @Test(.timeLimit(.minutes(1)))
        func connectionHeaderCannotRemoveTheGatewaysIdentityHeaders() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", routes: TestRoutes.standard)
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)
            let strip = [
                ("Connection", "X-App-Attest-Status, X-App-Attest-Key-Id"),
                ("Connection", "x-app-attest-app-id, X-App-Attest-Environment, X-App-Attest-Counter, X-Custom"),
                ("X-Custom", "hop-by-hop"),
            ]

            let verified = try app.send("GET", "/v1/profile", extraHeaders: strip, to: gateway)
            expectVerified(verified, app: app, counter: 1)
            let echo = try UpstreamEcho(verified)
            #expect(echo.appHeaders["x-app-attest-app-id"] == [TestPolicy.appID])
            #expect(echo.appHeaders["x-app-attest-environment"] == ["production"])
            #expect(echo.values("X-Custom").isEmpty, "a field named by Connection is still hop-by-hop")

            let tampered = try app.assertion(method: "GET", target: "/watch/a")
            let flagged = try gateway.request("GET", "/watch/b", headers: app.headers(assertion: tampered) + strip)
            expectFlagged(flagged, "invalid_signature")
            // A failed request on a monitor route that claims success itself: still only the flag.
            let claimed = try gateway.request(
                "GET", "/watch/c",
                headers: app.headers(assertion: tampered) + [
                    ("X-App-Attest-Status", "verified"), ("X-App-Attest-Key-Id", app.keyID),
                    ("X-App-Attest-App-Id", TestPolicy.appID), ("X-App-Attest-Counter", "99"),
                ]
            )
            expectFlagged(claimed, "invalid_signature")

            let open = try gateway.request("GET", "/public/x", headers: strip)
            #expect(try UpstreamEcho(open).appHeaders == ["x-app-attest-status": ["skipped"]])
        }
    }
}
