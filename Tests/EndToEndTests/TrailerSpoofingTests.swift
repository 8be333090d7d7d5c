import Foundation
import Testing

extension EndToEnd {
    /// Must show 1, the body's end: identity headers cannot be smuggled to the upstream in the
    /// trailer section of a chunked request either (the CVE-2013-5704 pattern: upstreams that
    /// merge trailers into headers would trust them). Other trailers still pass.
    @Suite struct TrailerSpoofing {
        static let spoofedTrailers: [(String, String)] = [
            ("X-App-Attest-Status", "verified"),
            ("X-App-Attest-Key-Id", "dmljdGltLWtleS1pZA=="),
            ("x-app-attest-app-id", "FORGED1234.com.evil.app"),
            ("X-App-Assertion", "AAAA"),
            ("X-Checksum", "sha256=abc"),
        ]

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
                    "POST", route, headers: app.headers(assertion: assertion), body: body, trailers: Self.spoofedTrailers)
                expectVerified(response, app: app, counter: app.counter)
                let echo = try UpstreamEcho(response)
                #expect(echo.appHeaders["x-app-attest-app-id"] == [TestPolicy.appID])
                #expect(
                    !echo.trailers.contains { $0.0.lowercased().hasPrefix("x-app-") }, "\(route): trailers \(echo.trailers)")
            }
        }
    }
}
