package import GateContract
package import HTTP1
package import PolicyModel

/// A gate for plain proxying: routes by the policy's `RouteTable`, ignores `mode`
/// (no attestation), never buffers, and forwards every routed request unchanged
/// (except that client-sent `X-App-Attest-*` headers are removed and
/// `X-App-Attest-Status: skipped` is added, as the upstream contract requires).
/// Requests no route matches are answered locally with 404 `no_route`.
/// The gateway itself always runs `AttestGate`; the tests proxy through this one.
package struct PassthroughGate: RequestGate {
    package let routes: RouteTable

    package init(routes: RouteTable) {
        self.routes = routes
    }

    package init(policy: GatewayPolicy) {
        self.routes = RouteTable(routes: policy.routes)
    }

    package func classify(_ head: HTTPRequestHead, client: String) -> GateClassification {
        guard let route = self.routes.match(method: head.method, path: head.path) else {
            return GateClassification(routeName: "-", upstream: nil, bufferBodyUpTo: nil)
        }
        return GateClassification(routeName: route.name, upstream: route.upstream, bufferBodyUpTo: nil)
    }

    package func decide(
        _ head: HTTPRequestHead,
        body: [UInt8]?,
        classification: GateClassification,
        promise: GateDecisionPromise
    ) {
        guard classification.upstream != nil else {
            promise.succeed(
                .respond(
                    .jsonError(
                        status: 404, code: "no_route",
                        message: "no route matches \(head.answeredMethod) \(head.path)"),
                    GateLogInfo(verdict: .noRoute)))
            return
        }
        var forwarded = head
        if forwarded.headers.fields.contains(where: { IdentityHeaders.isReserved($0.name) }) {
            IdentityHeaders.strip(&forwarded.headers)
        }
        forwarded.headers.add(name: "X-App-Attest-Status", value: "skipped")
        promise.succeed(.forward(forwarded, GateLogInfo(verdict: .skipped)))
    }
}
