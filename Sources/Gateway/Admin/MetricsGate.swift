/// A minimal admin gate: `GET /metrics` (Prometheus text) and `GET /healthz`, everything
/// else 404, all answered locally. The full admin gate (with `/readyz`) is `AdminGate`;
/// this one serves plain proxy deployments and tests.
package struct MetricsGate: RequestGate {
    package let registry: MetricsRegistry

    package init(registry: MetricsRegistry) {
        self.registry = registry
    }

    package func classify(_ head: HTTPRequestHead, client: String) -> GateClassification {
        GateClassification(routeName: "admin", upstream: nil, bufferBodyUpTo: nil)
    }

    package func decide(
        _ head: HTTPRequestHead,
        body: [UInt8]?,
        classification: GateClassification,
        completion: @escaping @Sendable (GateDecision) -> Void
    ) {
        let info = GateLogInfo(verdict: "admin")
        guard head.method == "GET" || head.method == "HEAD" else {
            completion(.respond(.jsonError(status: 405, code: "method_not_allowed", message: "use GET"), info))
            return
        }
        switch head.path {
        case "/metrics":
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/plain; version=0.0.4; charset=utf-8")
            completion(
                .respond(LocalResponse(status: 200, headers: headers, body: Array(self.registry.render().utf8)), info))
        case "/healthz":
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/json")
            completion(
                .respond(LocalResponse(status: 200, headers: headers, body: Array("{\"status\":\"ok\"}".utf8)), info))
        default:
            completion(
                .respond(.jsonError(status: 404, code: "not_found", message: "no admin endpoint \(head.path)"), info))
        }
    }
}
