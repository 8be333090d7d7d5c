import Foundation
import GateContract
import HTTP1
import KeyStore
import PolicyModel
import Verification

/// A request on a route with `accept_token:` that carries `Authorization: Bearer <token>`
/// instead of an assertion: the token is checked without I/O (`AttestationTokens.check`); a
/// `limited_use` route then consumes its `jti` in the store, atomically for the whole fleet
/// (Redis `SET … NX EX`, as challenges are redeemed), so exactly one of any number of copies
/// passes.
///
/// Immutable; `verify` runs on the connection's loop and calls the store from it.
struct TokenRouteCheck: Sendable {
    static let authorization = "Authorization"
    /// The store name space of consumed token IDs: `appattest:ch:{jti:<jti>}`. A challenge is
    /// base64url and never holds `:`, so the two cannot collide.
    static let consumedPrefix = "jti:"

    let tokens: AttestationTokens
    let appIDs: [String]
    let environment: EnvironmentPolicy
    let store: any AttestStore
    let metrics: any GateMetrics
    let storeFailures: StoreFailureReporter
    let now: @Sendable () -> Date

    /// True when the route takes a token and the request offers one instead of an assertion.
    /// A request with assertion headers is judged by its assertion: apps that use
    /// `Authorization` for their own sessions keep sending assertions on such routes.
    /// `acceptsToken`: the route has `accept_token` (a flag, so the hot path copies no route).
    static func offersToken(_ head: HTTPRequestHead, acceptsToken: Bool) -> Bool {
        guard acceptsToken, head.headers[Self.authorization] != nil else { return false }
        return head.headers[IdentityHeaders.keyID] == nil && head.headers[IdentityHeaders.assertion] == nil
            && head.headers[IdentityHeaders.debugToken] == nil && head.headers[IdentityHeaders.deviceCheckToken] == nil
    }

    /// The token of exactly one `Authorization: Bearer <token>` field (scheme case-insensitive,
    /// RFC 9110 §11.1), else nil.
    static func bearerToken(_ head: HTTPRequestHead) -> String? {
        var found: String?
        for field in head.headers where field.name.caseInsensitiveEquals(Self.authorization) {
            guard found == nil else { return nil }
            found = field.value
        }
        guard let value = found, value.utf8.count > 7, value.prefix(7).lowercased() == "bearer " else { return nil }
        let token = value.dropFirst(7).trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }

    func verify(
        _ head: HTTPRequestHead, route: RoutePolicy, judgement: RouteJudgement,
        completion: @escaping @Sendable (GateDecision) -> Void
    ) {
        let conclude: @Sendable (ProtectedRequestOutcome) -> Void = { [self] outcome in
            if case .storeFailed(let error, let operation, _) = outcome {
                self.storeFailures.report(error, operation: operation, route: route.name)
            }
            self.metrics.requestDecided(route: route.name, verdict: outcome.verdict)
            if let arm = judgement.arm {
                self.metrics.rolloutDecided(route: route.name, arm: arm, verdict: outcome.verdict)
            }
            completion(outcome.decision(for: head, route: route, judgement: judgement))
        }
        guard let acceptance = route.acceptToken else {
            conclude(.failed(EnforcementError(.token(.malformed), "route \(route.name) takes no token"), keyID: nil))
            return
        }
        guard let text = Self.bearerToken(head) else {
            conclude(
                .failed(
                    EnforcementError(.token(.malformed), "send exactly one Authorization: Bearer <token>"), keyID: nil))
            return
        }
        let now = Int64(self.now().timeIntervalSince1970.rounded(.down))
        let claims: TokenClaims
        switch self.tokens.check(text, audience: acceptance.audience, now: now) {
        case .failure(let error):
            conclude(.failed(EnforcementError(.token(error.code), error.reason), keyID: nil))
            return
        case .success(let checked):
            claims = checked
        }
        // A token outlives a policy change: an App ID dropped since it was issued is refused.
        guard self.appIDs.contains(claims.appID) else {
            conclude(.failed(EnforcementError(.appIDMismatch, "the token's App ID is no longer accepted"), keyID: nil))
            return
        }
        if self.environment != .any && claims.environment != self.environment.rawValue {
            conclude(
                .failed(
                    EnforcementError(.environmentMismatch, "the token was issued to a \(claims.environment) key"),
                    keyID: nil))
            return
        }
        // The route's build rules hold for tokens as for assertions: the token carries what the
        // key reported (a category name the gateway wrote itself, so it always parses).
        if let refusal = route.appValidation?.refusal(
            category: claims.validationCategory.flatMap(LaunchValidationCategory.value(named:)),
            bundleVersion: claims.bundleVersion, keyAccessPolicy: claims.keyAccessPolicy)
        {
            conclude(.failed(refusal, keyID: nil))
            return
        }
        // A token is worth the proof it was exchanged for: one exchanged for a debug token passes
        // only where a debug token itself would.
        if claims.platform == AttestationTokens.platformDebug && !route.allowDebugTokens {
            conclude(.failed(.debugTokenNotAllowed(route: route.name), keyID: nil))
            return
        }
        // A DeviceCheck token's JWT is worth a DeviceCheck token: only `fallback: devicecheck` routes.
        if claims.platform == AttestationTokens.platformDeviceCheck && route.fallback != .deviceCheck {
            conclude(.failed(.deviceCheckNotAllowed(route: route.name), keyID: nil))
            return
        }
        guard acceptance.limitedUse else {
            conclude(.token(claims))
            return
        }
        // Kept until the token could no longer pass anywhere in the fleet.
        let ttl = Int(max(1, claims.expiresAt - now + Int64(self.tokens.configuration.clockSkewSeconds) + 1))
        self.store.putChallenge(Self.consumedPrefix + claims.tokenID, ttlSeconds: ttl) { result in
            switch result {
            case .failure(let error):
                conclude(.storeFailed(error, operation: "consume_token", keyID: nil))
            case .success(true):
                conclude(.token(claims))
            case .success(false):
                conclude(
                    .failed(EnforcementError(.tokenReplayed, "this limited-use token was already used"), keyID: nil))
            }
        }
    }
}
