import Foundation
import GatewayTesting
import HTTP1
import Testing

@testable import GateContract
@testable import HTTPProxy

@Suite struct ProxyErrorTests {
    @Test func everyCodeHasItsStatus() {
        let expected: [ProxyError.Code: Int] = [
            .bodyTooLarge: 413, .bodyBudgetExhausted: 503, .requestTimeout: 408, .upstreamUnavailable: 502,
            .upstreamTimeout: 504, .upstreamInvalidResponse: 502, .upstreamBusy: 503, .invalidForwardedHeader: 400,
            .authzUntrustedPeer: 403, .rateLimited: 429,
            .upstreamTLSError: 502, .upstreamTLSCertificateExpired: 502, .upstreamTLSHostnameMismatch: 502,
            .upstreamTLSUnknownCA: 502, .websocketUpgradeInvalid: 400, .websocketVersionUnsupported: 426,
        ]
        #expect(Set(expected.keys) == Set(ProxyError.Code.allCases))
        for code in ProxyError.Code.allCases {
            #expect(code.status == expected[code], "\(code)")
        }
    }

    @Test func responseIsTheStableJSONErrorWithRetryAfterWhereARetryHelps() throws {
        let budget = ProxyError.bodyBudgetExhausted.response
        #expect(budget.status == 503)
        #expect(budget.headers.values(for: "Retry-After") == ["1"])
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(budget.body)) as? [String: String])
        #expect(object["error"] == "body_budget_exhausted")
        #expect(object["message"] == "the gateway is holding too many request bodies; retry later")

        let tooLarge = ProxyError.bodyTooLarge(declared: 5000, cap: 1000).response
        #expect(tooLarge.status == 413)
        #expect(tooLarge.headers.values(for: "Retry-After").isEmpty)
        let message = try #require(
            try JSONSerialization.jsonObject(with: Data(tooLarge.body)) as? [String: String])["message"]
        #expect(message == "request body of 5000 bytes exceeds the route's limit of 1000 bytes")
    }

    @Test func upstreamFailuresMapToTheirErrors() {
        typealias Failure = ProxyConnectionStateMachine.UpstreamFailure
        #expect(Failure.unavailable.error.code == .upstreamUnavailable)
        #expect(Failure.timeout.error.code == .upstreamTimeout)
        #expect(Failure.invalidResponse.error.code == .upstreamInvalidResponse)
        #expect(Failure.poolExhausted.error.code == .upstreamBusy)
    }
}
