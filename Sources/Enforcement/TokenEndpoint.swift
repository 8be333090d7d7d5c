import Foundation
import GateContract
import GatewayIO
import HTTP1
import PolicyModel
import Verification

/// `POST <endpoints.token>` (default `/app-attest/token`): exchanges a proof for an ES256
/// attestation token (`AttestationTokens`).
///
/// The request is verified exactly as a protected request on a route with `binding: request`
/// and no challenge: `X-App-Attest-Key-Id` and `X-App-Assertion` over the method, target and
/// this body, the counter advanced in the store (`ProtectedRequestVerifier.verifyOutcome`).
/// Where `tokens.allow_debug_tokens` says so, an `X-App-Attest-Debug-Token` instead. The body is
/// `{"audience": "<one of tokens.audiences>"}`; the assertion covers it, so a token for another
/// audience needs another assertion. Answers `{"token", "token_type": "Bearer", "expires_in",
/// "audience"}` with `Cache-Control: no-store`.
///
/// Immutable; `respond` runs on the connection's loop (the store is called from it).
struct TokenEndpoint: Sendable {
    static let routeLabel = GateEndpoint.token.routeLabel

    let path: String
    let tokens: AttestationTokens?
    let appIDs: [String]
    let environment: EnvironmentPolicy
    let verifier: ProtectedRequestVerifier
    let metrics: any GateMetrics
    let now: @Sendable () -> Date

    /// The route the exchange is judged under: enforced, the assertion over the whole request,
    /// no challenge (the counter already makes each assertion single use).
    static func route(path: String, allowDebugTokens: Bool) -> RoutePolicy {
        var route = RoutePolicy(
            name: Self.routeLabel, match: RoutePolicy.Match(path: path), upstream: "", mode: .enforce,
            challenge: .none, binding: .request, maxBodyBytes: EndpointRequests.maxEndpointBodyBytes)
        route.allowDebugTokens = allowDebugTokens
        return route
    }

    func respond(
        to head: HTTPRequestHead, body: [UInt8]?, loop: EventLoop,
        completion: @escaping @Sendable (GateDecision) -> Void
    ) {
        guard let tokens = self.tokens else {
            completion(self.refuse(EnforcementError(.tokensNotConfigured, "this gateway issues no tokens (tokens:)")))
            return
        }
        guard head.method == "POST" else {
            completion(self.refuse(.methodNotAllowed(endpoint: self.path)))
            return
        }
        let audience: TokensConfiguration.Audience
        do {
            audience = try Self.audience(in: body ?? [], tokens: tokens.configuration)
        } catch {
            completion(self.refuse(error))
            return
        }
        let route = Self.route(path: self.path, allowDebugTokens: tokens.configuration.allowDebugTokens)
        let appIDs = self.appIDs
        let environment = self.environment
        let now = self.now
        self.verifier.verifyOutcome(head, body: body ?? [], route: route, loop: loop) { [self] outcome in
            let holder: AttestationTokens.Holder
            switch outcome {
            case .verified(let identity):
                holder = AttestationTokens.Holder(
                    subjectName: identity.keyID, appID: identity.appID, platform: AttestationTokens.platformIOS,
                    environment: identity.environment, riskMetric: identity.riskMetric,
                    validationCategory: identity.validationCategory, bundleVersion: identity.bundleVersion,
                    keyAccessPolicy: identity.keyAccessPolicy)
            case .debug(let name):
                // A debug token names no device and no App ID of its own: the policy's first, and a
                // platform no device token carries, so a service can refuse it.
                holder = AttestationTokens.Holder(
                    subjectName: "debug:" + name, appID: appIDs.first ?? "", platform: AttestationTokens.platformDebug,
                    environment: environment == .production ? "production" : "development")
            case .failed(let error, _):
                completion(self.refuse(error))
                return
            case .storeFailed:
                // Fail closed whatever `on_store_error` says elsewhere: no token without a counter.
                completion(self.refuse(.stateUnavailable()))
                return
            case .deviceCheck, .token:
                completion(self.refuse(EnforcementError(.malformedRequest, "send an assertion to get a token")))
                return
            }
            let issued: (token: String, claims: TokenClaims)
            do throws(TokenError) {
                issued = try tokens.issue(
                    to: holder, audience: audience, now: Int64(now().timeIntervalSince1970.rounded(.down)))
            } catch {
                Log.error("token_signing_failed", [("reason", error.reason)])
                completion(self.refuse(EnforcementError(.internalError, error.reason)))
                return
            }
            self.metrics.requestDecided(route: Self.routeLabel, verdict: outcome.verdict)
            let json = JSONText.object([
                ("token", JSONText.quote(issued.token)), ("token_type", JSONText.quote("Bearer")),
                ("expires_in", String(audience.ttlSeconds)), ("audience", JSONText.quote(audience.name)),
            ])
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Cache-Control", value: "no-store")
            let keyID: String? = if case .verified(let identity) = outcome { identity.keyID } else { nil }
            completion(
                .respond(
                    LocalResponse(status: 200, headers: headers, body: Array(json.utf8)),
                    GateLogInfo(verdict: outcome.verdict, keyID: keyID)))
        }
    }

    /// `{"audience": name}` naming one of the policy's audiences.
    static func audience(
        in body: [UInt8], tokens: TokensConfiguration
    ) throws(EnforcementError) -> TokensConfiguration.Audience {
        let object = try EndpointRequests.jsonObject(body, maxBytes: EndpointRequests.maxEndpointBodyBytes)
        guard let name = object["audience"] as? String, !name.isEmpty else {
            throw EnforcementError(.malformedRequest, "field audience (a string) is missing")
        }
        guard let audience = tokens.audience(name) else {
            throw EnforcementError(.tokenAudienceUnknown, "audience is not one this gateway issues tokens for")
        }
        return audience
    }

    private func refuse(_ error: EnforcementError) -> GateDecision {
        self.metrics.requestDecided(route: Self.routeLabel, verdict: error.verdict)
        return .respond(error.response, GateLogInfo(verdict: error.verdict))
    }
}
