import AppleClient
import GateContract
import HTTP1
import PolicyModel
import RedisClient
import Verification

/// How verification of one protected request ended, before the route's mode applies.
enum ProtectedRequestOutcome: Sendable {
    case verified(IdentityHeaders.Identity)
    /// Admitted by the named debug token.
    case debug(name: String)
    /// Admitted by a gateway DeviceCheck token (`fallback: devicecheck`).
    case deviceCheck(DeviceCheckTokens.Claims)
    /// Admitted by an attestation token (`accept_token:`).
    case token(TokenClaims)
    case failed(EnforcementError, keyID: String?)
    /// The store could not answer `operation`: the route's `on_store_error` decides.
    case storeFailed(StoreError, operation: String, keyID: String?)

    /// The verdict label of the outcome (metrics and the access log).
    var verdict: AttestVerdict {
        switch self {
        case .verified: return .verified
        case .debug: return .debug
        case .deviceCheck: return .deviceCheck
        case .token: return .token
        case .failed(let error, _): return error.verdict
        case .storeFailed: return .storeError
        }
    }

    /// The request's judgement and the route's `on_store_error` applied: forward (with the
    /// identity headers, or with why it failed when monitored) or answer the denial.
    func decision(for head: HTTPRequestHead, route: RoutePolicy, judgement: RouteJudgement) -> GateDecision {
        let arm = judgement.arm
        switch self {
        case .verified(let identity):
            var info = GateLogInfo(verdict: self.verdict, keyID: identity.keyID, arm: arm)
            info.platform = identity.platform
            return .forward(IdentityHeaders.forwarded(head, status: .verified, identity: identity, arm: arm), info)
        case .debug(let name):
            var forwarded = IdentityHeaders.forwarded(head, status: .debug, arm: arm)
            forwarded.headers.add(name: IdentityHeaders.debugTokenName, value: name)
            return .forward(forwarded, GateLogInfo(verdict: self.verdict, arm: arm))
        case .deviceCheck(let claims):
            // App ID and environment as the token says; no key ID or counter: the upstream
            // sees `devicecheck` and knows the assurance is a genuine device, not an attested
            // app instance.
            var forwarded = IdentityHeaders.forwarded(head, status: .deviceCheck, arm: arm)
            forwarded.headers.add(name: IdentityHeaders.appID, value: claims.appID)
            forwarded.headers.add(name: IdentityHeaders.environment, value: claims.environment.rawValue)
            return .forward(forwarded, GateLogInfo(verdict: self.verdict, arm: arm))
        case .token(let claims):
            // App ID and environment as the token says; the subject stays in the token (the
            // upstream that wants it verifies the forwarded Authorization itself).
            var forwarded = IdentityHeaders.forwarded(head, status: .token, arm: arm)
            forwarded.headers.add(name: IdentityHeaders.appID, value: claims.appID)
            forwarded.headers.add(name: IdentityHeaders.environment, value: claims.environment)
            return .forward(forwarded, GateLogInfo(verdict: self.verdict, arm: arm))
        case .failed(let error, let keyID):
            let info = GateLogInfo(verdict: self.verdict, keyID: keyID, arm: arm)
            // A body over the cap is refused in every mode: the cap bounds memory.
            if judgement.mode == .monitor && error.code != .bodyTooLarge {
                return .forward(
                    IdentityHeaders.forwarded(head, status: .failed(reason: error.code.rawValue), arm: arm), info)
            }
            return .respond(error.response, info)
        case .storeFailed(_, _, let keyID):
            let info = GateLogInfo(verdict: self.verdict, keyID: keyID, arm: arm)
            if route.onStoreError == .allow || judgement.mode == .monitor {
                return .forward(
                    IdentityHeaders.forwarded(
                        head, status: .unverified(reason: AttestVerdict.storeError.rawValue), arm: arm),
                    info
                )
            }
            return .respond(EnforcementError.stateUnavailable().response, info)
        }
    }
}
