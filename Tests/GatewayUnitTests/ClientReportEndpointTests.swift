import Foundation
import GatewayTesting
import Testing

@testable import Enforcement
@testable import GateContract
@testable import HTTP1
@testable import KeyStore
@testable import PolicyModel

/// `POST /app-attest/report` (issue 34): apps' own attestation failures, counted by platform
/// and allowlisted code; malformed, oversize and over-rate reports refused with their codes.
@Suite struct ClientReportEndpointTests {
    static let routes = """
          - name: api
            match: { path_prefix: /v1/ }
            upstream: api
        """

    @Test(arguments: [
        (#"{"platform":"ios","domain":"com.apple.devicecheck.error","code":3}"#, "ios|dc_invalid_key"),
        (#"{"platform":"ios","domain":"com.apple.devicecheck.error","code":1}"#, "ios|dc_feature_unsupported"),
        (#"{"platform":"ios","domain":"com.apple.devicecheck.error","code":77}"#, "ios|other"),
        (#"{"platform":"ios","domain":"NSURLErrorDomain","code":3}"#, "ios|other"),
        (
            #"{"platform":"android","domain":"android.security.keystore","code":"android.security.keystore.StrongBoxUnavailableException"}"#,
            "android|keystore_strongbox_unavailable"
        ),
        (#"{"platform":"android","domain":"java.security","code":"KeyStoreException"}"#, "android|keystore_exception"),
        (#"{"platform":"android","domain":"x","code":"KeyStoreException"}"#, "android|other"),
        (#"{"platform":"android","domain":"android.security.keystore","code":"alice@example.com"}"#, "android|other"),
    ])
    func aReportIsCountedUnderItsAllowlistedLabel(body: String, counted: String) async throws {
        let h = try ProofHarness(routes: Self.routes)
        let (_, decision, _) = await runGate(h.gate, request("POST", "/app-attest/report"), body: Array(body.utf8))
        #expect(decision.status == 202)
        #expect(h.metrics.snapshot.clientReports == [counted: 1])
    }

    @Test(arguments: [
        #"not json"#,
        #"[1,2]"#,
        #"{"platform":"windows","domain":"d","code":1}"#,
        #"{"platform":"ios","domain":"com.apple.devicecheck.error","code":"3"}"#,
        #"{"platform":"ios","domain":"com.apple.devicecheck.error","code":true}"#,
        #"{"platform":"android","domain":"android.security.keystore","code":3}"#,
        #"{"platform":"ios","code":3}"#,
        "",
    ])
    func aMalformedReportIsRefusedAndNotCounted(body: String) async throws {
        let h = try ProofHarness(routes: Self.routes)
        let (_, decision, _) = await runGate(h.gate, request("POST", "/app-attest/report"), body: Array(body.utf8))
        #expect(decision.status == 400)
        #expect(decision.errorCode == "malformed_request")
        #expect(h.metrics.snapshot.clientReports.isEmpty)
    }

    @Test func theBodyIsCappedAtOneKiB() async throws {
        let h = try ProofHarness(routes: Self.routes)
        let classification = h.gate.classify(request("POST", "/app-attest/report"), client: "192.0.2.1")
        #expect(classification.bufferBodyUpTo == 1024, "the proxy answers 413 beyond")
        let padded =
            #"{"platform":"ios","domain":"com.apple.devicecheck.error","code":3,"pad":""#
            + String(repeating: "x", count: 1024) + #""}"#
        let (_, decision, _) = await runGate(h.gate, request("POST", "/app-attest/report"), body: Array(padded.utf8))
        #expect(decision.status == 413)
        #expect(decision.errorCode == "body_too_large")
        #expect(h.metrics.snapshot.clientReports.isEmpty)
    }

    @Test func otherMethodsAreRefused() async throws {
        let h = try ProofHarness(routes: Self.routes)
        let (_, decision, _) = await runGate(h.gate, request("GET", "/app-attest/report"))
        #expect(decision.status == 405)
        #expect(decision.errorCode == "method_not_allowed")
    }

    @Test func anAddressOverTheEndpointRateIsRefused() async throws {
        let policy = try PolicyLoader.parse(
            RequestProofPolicyTests.header + """
                limits: { challenge_rate_per_second: 1, challenge_burst: 2 }
                routes:
                \(Self.routes)
                """, sourcePath: "p.yaml")
        let metrics = RecordingGateMetrics()
        // The endpoint limiter's clock stands still: no token comes back during the test.
        let gate = try AttestGate(
            policy: policy, store: MemoryStore(), metrics: metrics, monotonicNanoseconds: { 1_000_000_000 })
        let body = Array(#"{"platform":"ios","domain":"com.apple.devicecheck.error","code":0}"#.utf8)
        for _ in 0..<2 {
            let (_, decision, _) = await runGate(
                gate, request("POST", "/app-attest/report"), body: body, client: "192.0.2.7")
            #expect(decision.status == 202)
        }
        let (_, refused, _) = await runGate(
            gate, request("POST", "/app-attest/report"), body: body, client: "192.0.2.7")
        #expect(refused.status == 429)
        #expect(refused.errorCode == "rate_limited")
        #expect(refused.localResponse?.headers["Retry-After"] != nil)
        let (_, other, _) = await runGate(gate, request("POST", "/app-attest/report"), body: body, client: "192.0.2.8")
        #expect(other.status == 202, "another address is unaffected")
        #expect(metrics.snapshot.clientReports == ["ios|dc_unknown_system_failure": 3])
    }

    @Test func theEndpointPathIsConfigurableAndMustNotCollide() throws {
        let policy = try PolicyLoader.parse(
            RequestProofPolicyTests.header + "endpoints: { report: /r }\n", sourcePath: "p.yaml")
        #expect(policy.endpoints.report == "/r")
        let error = policyError(RequestProofPolicyTests.header + "endpoints: { report: /app-attest/attest }\n")
        #expect(error?.code == .endpointCollision, "\(String(describing: error))")
    }
}
