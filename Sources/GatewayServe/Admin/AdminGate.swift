package import AppleClient
import Dispatch
package import GateContract
package import GatewayIO
package import HTTP1
import HTTPProxy
package import KeyStore
import RedisClient
import Synchronization

/// The gate of the admin listener (`admin_listen`): answers everything locally, never
/// forwards.
///
/// - `GET /metrics`: Prometheus text exposition format 0.0.4.
/// - `GET /healthz`: 200 while the process runs.
/// - `GET /readyz`: 200 only when a policy is loaded and, when `storeRequired`
///   (`readiness.require_store`, `ReadinessPolicy`), the store answers `ping` within
///   `pingTimeout`; 503 with the reason otherwise (load balancers stop sending traffic). The
///   store is pinged either way: `"store":"ok"` or `"store":"unavailable"` (with the reason)
///   is in the answer, so a probe shows a degraded instance that stays ready.
/// - `GET /config`: the effective policy in force (`check-config`'s summary: defaults applied,
///   secrets masked), text.
/// - `POST /devicecheck/query`, `/devicecheck/update`: DeviceCheck's two bits for upstream
///   services, behind a bearer token (`DeviceCheckAdminAPI`); 404 when not configured.
/// - `GET /console`, `/console.json`: the enforcement console (`EnforcementConsole`), behind
///   the same bearer token when one is configured (`apple.device_check.admin_token_file`).
///
/// State is read through closures at request time, so a policy reload that swaps the
/// store or the policy is seen without rebuilding this gate. Immutable; any queue.
package final class AdminGate: RequestGate {
    package static let routeName = "_admin"

    private let metricsText: @Sendable () -> String
    private let configText: @Sendable () -> String
    private let store: @Sendable () -> (any AttestStore)?
    private let isPolicyLoaded: @Sendable () -> Bool
    private let pingTimeout: Duration
    private let deviceCheck: DeviceCheckAdminAPI?
    /// `attest_gateway_devicecheck_admin_total{operation,result}`; nil in tests without a registry.
    private let deviceCheckMetrics: (@Sendable (String, String) -> Void)?
    private let storeRequired: Bool
    /// `attest_gateway_verdicts_total{route="_admin",verdict="skipped"}`: the admin listener's
    /// requests are in `attest_gateway_requests_total` (the proxy counts every exchange), so
    /// they are counted here too; nil in tests without a registry.
    private let decided: Counter?
    private let console: EnforcementConsole?
    /// The routes of the policy this gate was built for, as the console shows them.
    private let consoleRoutes: [EnforcementConsoleReport.Route]
    /// Required as `Authorization: Bearer` on the console when set.
    private let adminToken: DeviceCheckAdminToken?
    private let timerQueue = DispatchQueue(label: "attest-gateway.admin.readyz")

    /// - Parameters:
    ///   - metricsText: the rendered registry (called per scrape).
    ///   - store: the store requests are served with now (nil: none built yet).
    ///   - isPolicyLoaded: true once a valid policy is serving.
    ///   - pingTimeout: default 1 s (a readiness probe must answer before the prober gives up).
    ///   - configText: the effective policy, secrets masked (called per request).
    ///   - storeRequired: a store that does not answer makes the instance unready
    ///     (`ReadinessPolicy.storeRequired(routes:)`).
    package init(
        metricsText: @escaping @Sendable () -> String,
        configText: @escaping @Sendable () -> String = { "" },
        store: @escaping @Sendable () -> (any AttestStore)?,
        isPolicyLoaded: @escaping @Sendable () -> Bool,
        pingTimeout: Duration = .seconds(1),
        deviceCheck: DeviceCheckAdminAPI? = nil,
        registry: MetricsRegistry? = nil,
        storeRequired: Bool = true,
        console: EnforcementConsole? = nil,
        consoleRoutes: [EnforcementConsoleReport.Route] = [],
        adminToken: DeviceCheckAdminToken? = nil
    ) {
        self.console = console
        self.consoleRoutes = consoleRoutes
        self.adminToken = adminToken
        self.storeRequired = storeRequired
        self.deviceCheck = deviceCheck
        self.decided = registry.map {
            $0.counter(
                "attest_gateway_verdicts_total", help: ProxyMetrics.verdictsHelp, labelNames: ["route", "verdict"]
            ).labels(Self.routeName, AttestVerdict.skipped.rawValue)
        }
        if let registry {
            let family = registry.counter(
                "attest_gateway_devicecheck_admin_total",
                help: "Admin DeviceCheck API calls, by operation and result (ok, unauthorized or the error code).",
                labelNames: ["operation", "result"])
            self.deviceCheckMetrics = { family.labels($0, $1).increment() }
        } else {
            self.deviceCheckMetrics = nil
        }
        self.metricsText = metricsText
        self.configText = configText
        self.store = store
        self.isPolicyLoaded = isPolicyLoaded
        self.pingTimeout = pingTimeout
    }

    package func classify(_ head: HTTPRequestHead, client: String) -> GateClassification {
        // The DeviceCheck API reads a JSON body; nothing else here does.
        let reads = self.deviceCheck != nil && head.method == "POST" && DeviceCheckAdminAPI.handles(head.path)
        return GateClassification(
            routeName: Self.routeName, upstream: nil, bufferBodyUpTo: reads ? DeviceCheckAdminAPI.maximumBodyBytes : nil
        )
    }

    package func decide(
        _ head: HTTPRequestHead,
        body: [UInt8]?,
        classification: GateClassification,
        promise: GateDecisionPromise
    ) {
        self.decided?.increment()
        let info = GateLogInfo(verdict: AttestVerdict.skipped)
        let path = head.path
        if DeviceCheckAdminAPI.handles(path) {
            guard let api = self.deviceCheck else {
                promise.succeed(
                    .respond(
                        .jsonError(
                            status: 404, code: "not_found",
                            message: "the DeviceCheck API is not configured (apple.device_check.admin_token_file)"),
                        info))
                return
            }
            api.respond(to: head, body: body, metrics: self.deviceCheckMetrics) { promise.succeed(.respond($0, info)) }
            return
        }
        if let console = self.console, EnforcementConsole.handles(path) {
            if let token = self.adminToken, !token.admits(authorization: head.headers["Authorization"]) {
                var response = LocalResponse.jsonError(
                    status: 401, code: "unauthorized",
                    message: "Authorization: Bearer <apple.device_check.admin_token_file> required")
                response.headers.add(name: "WWW-Authenticate", value: "Bearer")
                promise.succeed(.respond(response, info))
                return
            }
            promise.succeed(.respond(console.response(to: head, routes: self.consoleRoutes), info))
            return
        }
        guard ["/metrics", "/healthz", "/readyz", "/config"].contains(path) else {
            promise.succeed(.respond(.jsonError(status: 404, code: "not_found", message: "no such admin path"), info))
            return
        }
        // HEAD is answered as GET (the connection sends the head only), RFC 9110 9.3.2.
        guard head.method == "GET" || head.method == "HEAD" else {
            var response = LocalResponse.jsonError(status: 405, code: "method_not_allowed", message: "GET only")
            response.headers.add(name: "Allow", value: "GET, HEAD")
            promise.succeed(.respond(response, info))
            return
        }
        switch path {
        case "/metrics":
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/plain; version=0.0.4; charset=utf-8")
            let body = Array(self.metricsText().utf8)
            promise.succeed(.respond(LocalResponse(status: 200, headers: headers, body: body), info))
        case "/config":
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            headers.add(name: "Cache-Control", value: "no-store")
            promise.succeed(
                .respond(LocalResponse(status: 200, headers: headers, body: Array(self.configText().utf8)), info))
        case "/healthz":
            promise.succeed(.respond(Self.status(200, "ok", reason: nil), info))
        default:
            self.readiness { readiness in
                promise.succeed(.respond(readiness.response, info))
            }
        }
    }

    /// Completes exactly once: with the ping's answer or at the timeout, whichever is first.
    private func readiness(_ completion: @escaping @Sendable (Readiness) -> Void) {
        guard self.isPolicyLoaded() else {
            completion(Readiness(storeRequired: true, storeProblem: "no policy loaded", policyLoaded: false))
            return
        }
        let required = self.storeRequired
        guard let store = self.store() else {
            completion(Readiness(storeRequired: required, storeProblem: "store not configured"))
            return
        }
        let once = OnceFlag()
        let timeout = self.pingTimeout
        self.timerQueue.asyncAfter(deadline: .now() + Self.dispatchInterval(timeout)) {
            if once.claim() {
                completion(
                    Readiness(storeRequired: required, storeProblem: "store did not answer ping within \(timeout)"))
            }
        }
        store.ping { result in
            guard once.claim() else { return }
            switch result {
            case .success: completion(Readiness(storeRequired: required, storeProblem: nil))
            case .failure(let error):
                completion(
                    Readiness(
                        storeRequired: required,
                        storeProblem: "store ping failed: \(error.kind.rawValue): \(error.reason)"))
            }
        }
    }

    /// One `/readyz` verdict: the policy, the store's answer, and whether the store counts.
    private struct Readiness {
        var storeRequired: Bool
        var storeProblem: String?
        var policyLoaded = true

        var isReady: Bool { self.policyLoaded && (self.storeProblem == nil || !self.storeRequired) }

        var response: LocalResponse {
            var extra: [(String, String)] = []
            if self.policyLoaded {
                extra.append(("store", JSONText.quote(self.storeProblem == nil ? "ok" : "unavailable")))
                extra.append(("store_required", self.storeRequired ? "true" : "false"))
            }
            return AdminGate.status(
                self.isReady ? 200 : 503, self.isReady ? "ready" : "not_ready", reason: self.storeProblem,
                extra: extra)
        }
    }

    private static func status(
        _ status: Int, _ text: String, reason: String?, extra: [(String, String)] = []
    ) -> LocalResponse {
        var pairs = [("status", JSONText.quote(text))]
        if let reason { pairs.append(("reason", JSONText.quote(reason))) }
        pairs += extra
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Cache-Control", value: "no-store")
        return LocalResponse(status: status, headers: headers, body: Array(JSONText.object(pairs).utf8))
    }

    private static func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(Int(min(seconds, 3600)) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
    }
}

/// True for the first `claim()` only, from any thread: "exactly once" for completions
/// that race a timeout.
package final class OnceFlag: Sendable {
    private let claimed = Atomic<Bool>(false)

    package init() {}

    package func claim() -> Bool {
        self.claimed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }
}
