import GatewayTesting
import Testing

@testable import GatewayIO
@testable import HTTP1
@testable import HTTPProxy

/// The pure side of `https://` upstream failures: verification verdict → reason label and
/// 502 code, the state machine's answer (never a retry), and serving no longer refusing
/// `https://` upstreams.
@Suite struct UpstreamTLSFailureTests {
    @Test(arguments: [
        (TLSVerificationFailure?.some(.expiredCertificate), "expired_certificate", "upstream_tls_certificate_expired"),
        (.hostnameMismatch, "hostname_mismatch", "upstream_tls_hostname_mismatch"),
        (.unknownCertificateAuthority, "unknown_ca", "upstream_tls_unknown_ca"),
        (.certificateNotYetValid, "certificate_not_yet_valid", "upstream_tls_error"),
        (.other(code: 26, text: "unsuitable certificate purpose"), "verify_error_26", "upstream_tls_error"),
        (nil, "handshake", "upstream_tls_error"),
    ])
    func verdictMapsToReasonAndCode(_ verdict: TLSVerificationFailure?, reason: String, code: String) {
        let failure = UpstreamTLSFailure(verdict)
        #expect(failure.reason == reason)
        #expect(failure.error.code.rawValue == code)
        #expect(failure.error.status == 502)
        #expect(ProxyConnectionStateMachine.UpstreamFailure.tls(failure).error == failure.error)
    }

    @Test func theThreeCertificateProblemsHaveDistinctCodes() {
        let codes = [
            UpstreamTLSFailure.certificateExpired, .hostnameMismatch, .unknownCertificateAuthority, .handshake,
        ]
        .map(\.error.code)
        #expect(Set(codes).count == 4)
    }

    /// Even when every retry condition holds for `unavailable`, a TLS failure is answered.
    @Test func aTLSFailureIsNeverRetried() {
        var machine = ProxyConnectionStateMachine()
        _ = machine.requestHeadReceived(
            method: "GET", framing: .none, keepAlive: true, expectsContinue: false, bufferBodyUpTo: nil)
        _ = machine.decided(forward: true)
        machine.upstreamConnected()
        let action = machine.upstreamFailed(
            .tls(.unknownCertificateAuthority), anyResponseByte: false, wasIdlePooledConnection: true,
            requestReplayable: true)
        #expect(action == .respond(.upstreamTLSUnknownCA, keepAlive: true))
    }
}
