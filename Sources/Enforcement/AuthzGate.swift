package import GateContract
package import GatewayIO
package import HTTP1
import PolicyModel

/// The `RequestGate` of the check-only listener (`authz_listen`): a team's own gateway (Envoy,
/// nginx, Traefik, Caddy) asks "is this request attested?" and forwards it itself.
///
/// It rebuilds the original request from the auth request (`AuthzRequest`), runs exactly the
/// inline gate on it (the same `AttestGate`: routes, challenges, counters in the same store,
/// debug tokens, app validation, the identity signature), and turns the decision into an answer
/// instead of a forward (`AuthzAnswer`). Since every decision is `.respond`, the proxy
/// connection that serves this listener never opens an upstream: the listener reuses the proxy's
/// listener, connection and parser unchanged.
///
/// Immutable; built with each policy (a reload builds a new one around the new inline gate).
package final class AuthzGate: RequestGate {
    private let inner: AttestGate
    private let pathPrefix: String
    private let metrics: AuthzMetrics

    package init(inner: AttestGate, pathPrefix: String, metrics: AuthzMetrics = AuthzMetrics(registry: nil)) {
        self.inner = inner
        self.pathPrefix = pathPrefix
        self.metrics = metrics
    }

    package func classify(_ head: HTTPRequestHead, client: String) -> GateClassification {
        let request: AuthzRequest
        switch AuthzRequest.reconstruct(head, pathPrefix: self.pathPrefix) {
        case .failure(let error):
            return self.refuse(error, dialect: nil, route: AttestGate.RouteLabel.none, routeIndex: nil)
        case .success(let rebuilt):
            request = rebuilt
        }
        var classification = self.inner.classify(request.head, client: client)
        if classification.refusal != nil {
            return classification
        }
        guard let index = classification.routeIndex else {
            // No route: the inline gate answers 404 `no_route` (a denial). An endpoint would answer
            // 2xx, which every proxy reads as "allowed": endpoints are served on `listen` only.
            if classification.endpoint != nil {
                return self.refuse(
                    EnforcementError(
                        .authzEndpoint,
                        "\(request.head.path) is one of the gateway's endpoints: route it to the gateway's listen: address, not through a check"
                    ), dialect: request.dialect, route: classification.routeName, routeIndex: nil)
            }
            return classification
        }
        let route = self.inner.route(at: index)
        if let error = Self.upgradeViolation(request, websocket: route.websocket, route: route.name) {
            return self.refuse(error, dialect: request.dialect, route: route.name, routeIndex: index)
        }
        if classification.judgement?.mode != .passthrough, request.head.headers[IdentityHeaders.debugToken] == nil,
            let why = Self.unverifiableBody(request, binding: route.binding)
        {
            return self.refuse(
                EnforcementError(.authzBodyRequired, "route \(route.name): \(why)"), dialect: request.dialect,
                route: route.name, routeIndex: index)
        }
        if request.dialect == .forwardAuth {
            // The auth request has no body; the original's is empty by the rule above.
            classification.bufferBodyUpTo = nil
        }
        return classification
    }

    /// Why a check of a WebSocket upgrade is refused, or nil (also nil for a request that is
    /// no upgrade). Traefik's `forwardAuth` and nginx's `auth_request` drop the hop-by-hop
    /// `Upgrade` and `Connection` from the check while Traefik forwards the upgrade itself when
    /// the check allows: any mark that survives (`Sec-WebSocket-Key`, or `Upgrade: websocket` as
    /// Caddy passes it) makes the check an upgrade attempt. On a route without
    /// `websocket: true` it is refused (inline would remove `Upgrade`; a check cannot remove it
    /// from what its front forwards); on a `websocket: true` route the RFC 6455 rules inline
    /// applies (`WebSocketOpening`), with inline's codes. The client's HTTP version is unknown
    /// to a check (its own is the front's) and is not judged.
    static func upgradeViolation(_ request: AuthzRequest, websocket: Bool, route: String) -> EnforcementError? {
        let opening = WebSocketOpening(request.head.headers)
        guard opening.hasUpgradeMark else { return nil }
        guard websocket else {
            return EnforcementError(
                .websocketNotAllowed,
                "route \(route) has no websocket: true and this check is of a WebSocket upgrade (Sec-WebSocket-Key or Upgrade: websocket), which the front would forward as one"
            )
        }
        switch opening.verdict(method: request.head.method, versionMinor: nil, hasBody: Self.hasBody(request.head)) {
        case .valid:
            return nil
        case .refused(.invalid(let message)):
            return EnforcementError(.websocketUpgradeInvalid, message)
        case .refused(.versionUnsupported(let message)):
            return EnforcementError(.websocketVersionUnsupported, message)
        }
    }

    /// The rebuilt request declares a body: a `Transfer-Encoding`, or a `Content-Length` other
    /// than 0 (Envoy's check of a bodiless request says `content-length: 0`). A forward-auth
    /// request never does (`AuthzRequest` drops both: the check carries no body).
    static func hasBody(_ head: HTTPRequestHead) -> Bool {
        for field in head.headers {
            if field.name.equalsLowercaseASCII("transfer-encoding") { return true }
            if field.name.equalsLowercaseASCII("content-length"), field.value != "0" { return true }
        }
        return false
    }

    /// Why the assertion of `request` cannot be checked from what the proxy sent, or nil.
    static func unverifiableBody(_ request: AuthzRequest, binding: RoutePolicy.Binding) -> String? {
        switch request.dialect {
        case .envoy:
            guard request.partialBody else { return nil }
            return
                "Envoy sent part of the body (x-envoy-auth-partial-body: true); the assertion covers all of it: raise with_request_body.max_request_bytes to the route's max_body_bytes and turn allow_partial_message off"
        case .forwardAuth:
            if binding == .head { return nil }
            if binding == .body {
                return "binding: body signs the body, which a forward-auth check does not carry"
            }
            if !AuthzRequest.bodilessMethods.contains(request.head.method) {
                return
                    "the assertion of a \(request.head.method) request covers its body, which a forward-auth check does not carry (only GET, HEAD, DELETE, OPTIONS can be checked)"
            }
            return nil
        }
    }

    private func refuse(
        _ error: EnforcementError, dialect: AuthzDialect?, route: String, routeIndex: Int?
    ) -> GateClassification {
        self.inner.countRefusal(route: route, verdict: error.verdict)
        self.metrics.decided(dialect: dialect, allowed: false)
        return .refused(
            route: route, routeIndex: routeIndex, response: AuthzAnswer.deny(error.response),
            verdict: error.verdict)
    }

    package func decide(
        _ head: HTTPRequestHead,
        body: [UInt8]?,
        classification: GateClassification,
        promise: GateDecisionPromise
    ) {
        // A refusal from `classify` (ours, already counted, or the inline gate's).
        if let refusal = classification.refusal {
            if case .respond(let response, let info) = refusal,
                response.headers[AuthzAnswer.errorHeader] == nil
            {
                self.metrics.decided(dialect: Self.dialect(of: head, prefix: self.pathPrefix), allowed: false)
                promise.succeed(.respond(AuthzAnswer.deny(response), info))
            } else {
                promise.succeed(refusal)
            }
            return
        }
        // Rebuilt again rather than carried: `classify` succeeded on the same head, and the
        // classification has no room for a head (it is copied several times per request).
        guard case .success(let request) = AuthzRequest.reconstruct(head, pathPrefix: self.pathPrefix) else {
            preconditionFailure("classify accepted an auth request that no longer reconstructs")
        }
        let metrics = self.metrics
        let dialect = request.dialect
        let relay = GateDecisionRelay { decision in
            switch decision {
            case .forward(let forwarded, let info):
                metrics.decided(dialect: dialect, allowed: true)
                promise.succeed(.respond(AuthzAnswer.allow(forwarded), info))
            case .respond(let response, let info):
                metrics.decided(dialect: dialect, allowed: false)
                promise.succeed(.respond(AuthzAnswer.deny(response), info))
            }
        }
        let inner = GateDecisionPromise(loop: promise.loop, receiver: relay)
        self.inner.decide(request.head, body: body, classification: classification, promise: inner)
        inner.askReturned()
    }

    private static func dialect(of head: HTTPRequestHead, prefix: String) -> AuthzDialect? {
        guard case .success(let request) = AuthzRequest.reconstruct(head, pathPrefix: prefix) else { return nil }
        return request.dialect
    }
}

/// `attest_gateway_authz_decisions_total{dialect, decision}`: the check-only listener's
/// answers (`allowed` = 200, `denied` = anything else; `dialect` `unknown` when the auth
/// request could not be read). The verdicts themselves are counted by the inline gate's
/// `attest_gateway_verdicts_total`, as for inline requests.
package struct AuthzMetrics: Sendable {
    private let counters: [String: (allowed: Counter, denied: Counter)]

    package static let family = "attest_gateway_authz_decisions_total"

    package init(registry: MetricsRegistry?) {
        guard let registry else {
            self.counters = [:]
            return
        }
        let family = registry.counter(
            Self.family, help: "Answers of the check-only listener (authz_listen), by dialect and decision.",
            labelNames: ["dialect", "decision"])
        var counters: [String: (allowed: Counter, denied: Counter)] = [:]
        for dialect in AuthzDialect.allCases.map(\.rawValue) + ["unknown"] {
            counters[dialect] = (family.labels(dialect, "allowed"), family.labels(dialect, "denied"))
        }
        self.counters = counters
    }

    func decided(dialect: AuthzDialect?, allowed: Bool) {
        guard let pair = self.counters[dialect?.rawValue ?? "unknown"] else { return }
        (allowed ? pair.allowed : pair.denied).increment()
    }
}
