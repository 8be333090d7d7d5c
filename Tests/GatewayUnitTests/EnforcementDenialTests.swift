import GatewayTesting
import HTTP1
import Testing

@testable import Enforcement
@testable import GateContract
@testable import PolicyModel
@testable import RedisClient

/// The denials written once for every path that gives them, the verdict labels of the proxy
/// layer, and how a protected request's outcome becomes a decision under the route's mode.
@Suite struct EnforcementDenialTests {
    @Test func sharedDenialsCarryTheirCodeStatusAndMessage() {
        let table: [(EnforcementError, String, Int, String)] = [
            (.stateUnavailable(), "store_error", 503, "attestation state is unavailable; retry later"),
            (.challengesUnavailable(), "store_error", 503, "challenges are unavailable; retry later"),
            (.unknownKey(), "unknown_key", 401, "no attested key with this key ID"),
            (.revokedKey(), "revoked_key", 401, "the key was revoked"),
            (.challengeAlreadyUsed(), "challenge_invalid", 401, "the challenge was already used"),
            (
                .debugTokenNotAllowed(route: "premium"), "debug_token_not_allowed", 403,
                "route premium does not accept X-App-Attest-Debug-Token"
            ),
            (
                .methodNotAllowed(endpoint: "/app-attest/attest"), "method_not_allowed", 405,
                "/app-attest/attest accepts POST only"
            ),
        ]
        for (error, code, status, reason) in table {
            #expect(error.code.rawValue == code)
            #expect(error.status == status, "\(code)")
            #expect(error.reason == reason)
        }
        #expect(EnforcementError.methodNotAllowed(endpoint: "/x").response.headers["Allow"] == "POST")
    }

    @Test func proxyLabelsAreVerdictsButNoGateSeries() {
        #expect(AttestVerdict.rejected.rawValue == "rejected")
        #expect(AttestVerdict.noRoute.rawValue == "no_route")
        #expect(AttestVerdict.admin.rawValue == "admin")
        #expect(AttestVerdict.malformed.rawValue == "malformed")
        // The per-route series of attest_gateway_requests_total: every gate verdict, in order.
        #expect(AttestVerdict.gateVerdicts == AttestVerdict.allCases.filter { !$0.isProxyLabel })
        #expect(
            AttestVerdict.gateVerdicts.map(\.rawValue) == [
                "verified", "skipped", "missing", "malformed", "invalid_signature", "counter_replay", "unknown_key",
                "revoked_key", "challenge_invalid", "store_error", "app_id_mismatch", "environment_mismatch",
                "internal_error", "rate_limited", "launch_validation_refused", "debug", "debug_token_invalid",
                "devicecheck", "devicecheck_refused", "apple_unavailable",
                "risk_metric_exceeded", "token", "token_refused",
            ])
    }

    private static let head = HTTPRequestHead(
        method: "GET", target: "/v1/x", headers: HTTPHeaders([("X-App-Attest-Status", "spoofed")]))

    private static func route(_ mode: RoutePolicy.Mode, onStoreError: RoutePolicy.StoreErrorAction = .deny)
        -> RoutePolicy
    {
        RoutePolicy(
            name: "r", match: .init(pathPrefix: "/v1"), upstream: "api", mode: mode, onStoreError: onStoreError)
    }

    /// The judgement `classify` makes for a route of `mode` outside a rollout.
    private static func judged(_ route: RoutePolicy, arm: RolloutArm? = nil) -> RouteJudgement {
        RouteJudgement(mode: route.mode == .monitor || arm == .monitor ? .monitor : .enforce, arm: arm)
    }

    @Test func failuresAreDeniedWhenEnforcedAndMarkedWhenMonitored() {
        let outcome = ProtectedRequestOutcome.failed(.unknownKey(), keyID: "abcdefgh")
        let denied = outcome.decision(
            for: Self.head, route: Self.route(.enforce), judgement: Self.judged(Self.route(.enforce)))
        #expect(denied.status == 401)
        #expect(denied.errorCode == "unknown_key")
        let marked = outcome.decision(
            for: Self.head, route: Self.route(.monitor), judgement: Self.judged(Self.route(.monitor), arm: .monitor))
        #expect(marked.forwardedHead?.headers.values(for: "X-App-Attest-Status") == ["failed; reason=unknown_key"])
        #expect(marked.forwardedHead?.headers["X-App-Attest-Rollout-Arm"] == "monitor")
        guard case .forward(_, let info) = marked else { return }
        #expect(info.verdict == .unknownKey && info.keyID == "abcdefgh" && info.arm == .monitor)
    }

    @Test func aBodyOverTheCapIsRefusedEvenWhenMonitored() {
        let outcome = ProtectedRequestOutcome.failed(
            EnforcementError(.bodyTooLarge, "body exceeds 1 bytes"), keyID: nil)
        #expect(
            outcome.decision(for: Self.head, route: Self.route(.monitor), judgement: Self.judged(Self.route(.monitor)))
                .status == 413)
    }

    @Test func storeFailuresFollowOnStoreError() {
        let outcome = ProtectedRequestOutcome.storeFailed(
            StoreError(.timeout, "slow"), operation: "fetch_key", keyID: nil)
        #expect(outcome.verdict == .storeError)
        let denied = outcome.decision(
            for: Self.head, route: Self.route(.enforce), judgement: Self.judged(Self.route(.enforce)))
        #expect(denied.status == 503)
        #expect(denied.errorCode == "store_error")
        for route in [Self.route(.enforce, onStoreError: .allow), Self.route(.monitor)] {
            let forwarded = outcome.decision(for: Self.head, route: route, judgement: Self.judged(route))
            #expect(
                forwarded.forwardedHead?.headers.values(for: "X-App-Attest-Status") == [
                    "unverified; reason=store_error"
                ])
        }
    }
}
