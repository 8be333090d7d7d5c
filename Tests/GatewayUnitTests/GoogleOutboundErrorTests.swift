import Enforcement
import GatewayTesting
import Testing

@testable import AppleClient
@testable import GatewayServe
@testable import GoogleClient
@testable import OutboundHTTP

/// A failed call to Google reports a `google_*` code, never Apple's: from the connection's state
/// machine, in the metrics' `outcome` label, and in what the Play Integrity decoder hears. No
/// sockets: the values alone.
@Suite struct GoogleOutboundErrorTests {
    static let request = Array("GET /attestation/status HTTP/1.1\r\nHost: x\r\n\r\n".utf8)

    /// A Google connection's machine driven to each transport failure.
    @Test(arguments: [
        ("connect", "google_unreachable"), ("tls", "google_tls_failed"), ("timeout", "google_timeout"),
        ("closed", "google_unreachable"), ("garbage", "google_malformed_answer"),
    ])
    func aGoogleConnectionsFailuresCarryGoogleCodes(step: String, expected: String) throws {
        var machine = OutboundHTTPConnectionStateMachine(peer: .google)
        _ = machine.start(Self.request, method: "GET")
        _ = machine.resolved()
        let action: OutboundHTTPConnectionStateMachine.Action
        switch step {
        case "connect":
            action = machine.connected(errno: 111)
        case "tls":
            _ = machine.connected(errno: 0)
            action = machine.failed("certificate verify failed", isTLS: true)
        case "timeout":
            _ = machine.connected(errno: 0)
            _ = machine.wrote(Self.request.count)
            action = machine.timedOut(after: .seconds(5))
        case "closed":
            _ = machine.connected(errno: 0)
            _ = machine.wrote(Self.request.count)
            action = machine.peerClosed()
        default:
            _ = machine.connected(errno: 0)
            _ = machine.wrote(Self.request.count)
            action = machine.received(Array("SMTP ready\r\n\r\n".utf8))
        }
        let (result, _) = try #require(action.completion)
        let error = try #require(result.failure)
        #expect(error.peer == .google)
        #expect(error.stableCode == expected)
        #expect(!error.stableCode.hasPrefix("apple_"))
        #expect(!error.reason.contains("Apple"), "\(error.reason)")
        #expect(OutboundClientMetrics.outcome(result) == expected)
    }

    @Test func playIntegrityHearsTheGoogleCodeOrTheBreaker() {
        let timeout = OutboundHTTPError(.timedOut, peer: .google, "no answer within 5 seconds")
        guard case .failed(let reason) = PlayIntegrityGoogleClient.reply(to: .failure(timeout)) else {
            Issue.record("a timeout is a failed call")
            return
        }
        #expect(reason.hasPrefix("google_timeout: "))
        let open = OutboundHTTPError(.unreachable, peer: .google, "circuit breaker open", isBreakerOpen: true)
        #expect(PlayIntegrityGoogleClient.reply(to: .failure(open)) == .breakerOpen)
        let unreachable = OutboundHTTPError(.unreachable, peer: .google, "connect refused")
        #expect(
            PlayIntegrityGoogleClient.reply(to: .failure(unreachable)) == .failed("google_unreachable: connect refused")
        )
        let answer = OutboundHTTPResponse(status: 429, body: [], isKeepAlive: true)
        #expect(
            PlayIntegrityGoogleClient.reply(to: .success(answer)) == .answered(status: 429, body: [], retryAfter: nil))
    }

    /// The same failure towards Apple keeps Apple's documented codes, through `AppleError`.
    @Test(arguments: OutboundHTTPError.Code.allCases)
    func appleKeepsItsCodes(code: OutboundHTTPError.Code) {
        let toApple = OutboundHTTPError(code, peer: .apple, "x")
        let toGoogle = OutboundHTTPError(code, peer: .google, "x")
        #expect(AppleError(toApple).code.description == toApple.stableCode)
        #expect(toGoogle.stableCode == "google_\(code.rawValue)")
        #expect(toApple != toGoogle)
    }
}
