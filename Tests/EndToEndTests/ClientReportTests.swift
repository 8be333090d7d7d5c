import Foundation
import Testing

extension EndToEnd {
    /// `POST /app-attest/report` through the built binary (issue 34): an app's failure report is
    /// counted by platform and code; oversize, malformed and over-rate reports are refused with
    /// their codes and counted nowhere.
    @Suite struct ClientReports {
        static let routes = """
              - name: api
                match: { path_prefix: /v1/ }
                upstream: api
                mode: enforce
            """

        @Test(.timeLimit(.minutes(1)))
        func reportsAreCountedAndBadOnesRefused() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway(
                "gw", extra: "limits: { challenge_rate_per_second: 1, challenge_burst: 3 }", routes: Self.routes)
            func report(_ body: String) throws -> HTTPResponse {
                try gateway.request("POST", "/app-attest/report", body: body)
            }
            let accepted = try report(#"{"platform":"ios","domain":"com.apple.devicecheck.error","code":4}"#)
            #expect(accepted.status == 202, "\(accepted)")
            expectDenied(try report(#"{"platform":"ios","code":"four"}"#), 400, "malformed_request")
            let oversize =
                #"{"platform":"ios","domain":"x","code":1,"pad":""# + String(repeating: "a", count: 1100) + "\"}"
            expectDenied(try report(oversize), 413, "body_too_large")
            // The address's endpoint bucket (burst 3, 1/s) is spent: the next report waits. A
            // slow machine may have earned a token back meanwhile: then the one after is refused.
            var extraAccepted = 0
            var limited: HTTPResponse?
            for _ in 0..<3 where limited == nil {
                let response = try report(
                    #"{"platform":"android","domain":"java.security","code":"KeyStoreException"}"#)
                if response.status == 202 { extraAccepted += 1 } else { limited = response }
            }
            let refused = try #require(limited)
            expectDenied(refused, 429, "rate_limited")
            #expect(refused.header("Retry-After") != nil)

            let metrics = try gateway.metrics()
            let family = "attest_gateway_client_reported_failures_total"
            #expect(metrics["\(family){platform=\"ios\",code=\"dc_server_unavailable\"}"] == 1)
            #expect(
                Int(metrics["\(family){platform=\"android\",code=\"keystore_exception\"}"] ?? 0) == extraAccepted)
            let counted = metrics.filter { $0.key.hasPrefix(family) }.values.reduce(0, +)
            #expect(Int(counted) == 1 + extraAccepted, "only accepted reports are counted")
        }
    }
}
