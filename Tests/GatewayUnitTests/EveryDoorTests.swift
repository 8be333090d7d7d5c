import Foundation
import GatewayTesting
import Simulator
import Testing

@testable import Enforcement
@testable import GateContract
@testable import HTTP1
@testable import KeyStore
@testable import PolicyModel

/// Issue 29: one judgement for every door. Each request is judged inline (`AttestGate`), as a
/// forward-auth check (nginx, Caddy, Traefik) and as an Envoy check (`AuthzGate`), and every door
/// must give the same verdict. Each finding of the issue is a case here that failed before.
@Suite struct EveryDoorTests {
    static let routes: [RoutePolicy] = {
        var debug = RoutePolicy(
            name: "debuggable", match: .init(pathPrefix: "/v1/debug"), upstream: "api", mode: .enforce)
        debug.allowDebugTokens = true
        return [
            debug,
            RoutePolicy(name: "api", match: .init(pathPrefix: "/v1/"), upstream: "api", mode: .enforce),
            RoutePolicy(name: "buy", match: .init(path: "/buy", methods: ["POST"]), upstream: "api", mode: .enforce),
            RoutePolicy(
                name: "item", match: .init(path: "/item", methods: ["DELETE", "PUT"]), upstream: "api", mode: .enforce),
            RoutePolicy(name: "open", match: .init(pathPrefix: "/"), upstream: "api", mode: .off),
        ]
    }()

    static func gate(routes: [RoutePolicy] = Self.routes) throws -> AttestGate {
        try AttestGate(
            policy: GatewayPolicy(
                listen: [ListenAddress(host: "127.0.0.1", port: 8080)],
                appIDs: [EnforcementHarness.appID],
                environment: .production,
                challengeTTLSeconds: 300,
                upstreams: ["api": UpstreamConfiguration(name: "api", host: "127.0.0.1", port: 9000)],
                routes: routes),
            store: MemoryStore(),
            trustRootsPEM: [EnforcementHarness.authority.rootCertificatePEM])
    }

    /// A verdict as every door can tell it: allowed (with the status header the upstream sees)
    /// or refused with a code.
    enum Verdict: Equatable, CustomStringConvertible {
        case allowed(status: String)
        case refused(code: String)

        var description: String {
            switch self {
            case .allowed(let status): "allowed(\(status))"
            case .refused(let code): "refused(\(code))"
            }
        }
    }

    static func verdict(inline decision: GateDecision) -> Verdict {
        if let head = decision.forwardedHead { return .allowed(status: head.headers["X-App-Attest-Status"] ?? "") }
        return .refused(code: decision.errorCode ?? "status \(decision.status ?? 0)")
    }

    static func verdict(check decision: GateDecision) -> Verdict {
        guard let answer = decision.localResponse else { return .refused(code: "forwarded by a check") }
        if answer.status == 200 { return .allowed(status: answer.headers["X-App-Attest-Status"] ?? "") }
        return .refused(code: answer.headers["X-App-Attest-Error"] ?? "status \(answer.status)")
    }

    /// The request as an Envoy check (`path_prefix` + target, the original headers).
    static func envoyCheck(_ head: HTTPRequestHead) -> HTTPRequestHead {
        var check = head
        check.target = "/ext_authz" + head.target
        return check
    }

    /// The verdicts of inline, forward-auth and Envoy for `head`.
    static func doors(_ head: HTTPRequestHead, gate: AttestGate) async -> [String: Verdict] {
        let authz = AuthzGate(inner: gate, pathPrefix: "/ext_authz")
        return [
            "inline": Self.verdict(inline: await runGate(gate, head).1),
            "forward-auth": Self.verdict(check: await runGate(authz, AuthzGateTests.forwardAuth(head)).1),
            "envoy": Self.verdict(check: await runGate(authz, Self.envoyCheck(head)).1),
        ]
    }

    /// Every door gives `expected`.
    static func expectEveryDoor(
        _ head: HTTPRequestHead, _ expected: Verdict, gate: AttestGate,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        for (door, verdict) in await Self.doors(head, gate: gate).sorted(by: { $0.key < $1.key }) {
            #expect(
                verdict == expected, "\(head.method) \(head.target) through \(door)", sourceLocation: sourceLocation)
        }
    }

    // MARK: - Finding 1: methods

    @Test(arguments: [("post", "/buy"), ("Post", "/buy"), ("delete", "/item"), ("get", "/v1/x")])
    func aMethodThatIsNotUpperCaseIsRefusedOnEveryDoor(method: String, target: String) async throws {
        await Self.expectEveryDoor(request(method, target), .refused(code: "invalid_method"), gate: try Self.gate())
    }

    // MARK: - Finding 2: method overrides

    @Test(arguments: [
        ("GET", "/buy", [("X-HTTP-Method-Override", "POST")]),
        ("GET", "/buy", [("x-http-method-override", "post")]),
        ("GET", "/buy", [("X-HTTP-Method", "POST")]),
        ("GET", "/buy", [("X-Method-Override", "POST")]),
        ("GET", "/buy", [("X-HTTP-Method-Override", "GET, POST")]),
        ("GET", "/buy", [("X-HTTP-Method-Override", "GET"), ("X-HTTP-Method-Override", "POST")]),
        ("POST", "/item", [("X-HTTP-Method-Override", "DELETE")]),
        ("POST", "/item", [("X-HTTP-Method-Override", "PUT")]),
        ("GET", "/buy?_method=POST", []),
        ("GET", "/buy?a=1&_METHOD=post", []),
        ("GET", "/buy?%5Fmethod=POST", []),
        ("POST", "/item?_method=delete", []),
    ])
    func anOverrideThatReachesAnotherRouteIsRefusedOnEveryDoor(
        method: String, target: String, headers: [(String, String)]
    ) async throws {
        await Self.expectEveryDoor(
            request(method, target, headers: headers), .refused(code: "method_override_refused"), gate: try Self.gate())
    }

    @Test func anOverrideThatStaysOnItsRouteChangesNothing() async throws {
        let gate = try Self.gate()
        await Self.expectEveryDoor(
            request("GET", "/public/x", headers: [("X-HTTP-Method-Override", "DELETE")]), .allowed(status: "skipped"),
            gate: gate)
        await Self.expectEveryDoor(
            request("GET", "/buy", headers: [("X-HTTP-Method-Override", "")]), .allowed(status: "skipped"), gate: gate)
    }

    @Test(arguments: ["P O S T", "POST\u{1}", "é", String(repeating: "A", count: 33)])
    func anOverrideThatIsNotAMethodIsRefused(value: String) async throws {
        await Self.expectEveryDoor(
            request("GET", "/buy", headers: [("X-HTTP-Method-Override", value)]),
            .refused(code: "invalid_method_override"), gate: try Self.gate())
    }

    @Test func aRouteThatExpectsOverridesIsJudgedUnderTheStrictestRouteTheyReach() async throws {
        var routes = Self.routes
        routes[routes.count - 1].allowMethodOverrides = true
        let gate = try Self.gate(routes: routes)
        // GET /buy is on the open route; as a POST it is the enforced buy route's.
        await Self.expectEveryDoor(
            request("GET", "/buy", headers: [("X-HTTP-Method-Override", "POST")]),
            .refused(code: "assertion_missing"), gate: gate)
        let (classification, _, _) = await runGate(
            gate, request("GET", "/buy?_method=POST"))
        #expect(classification.routeName == "buy")
    }

    @Test(arguments: [
        "application/x-www-form-urlencoded", "Application/X-WWW-Form-Urlencoded; charset=utf-8",
        "multipart/form-data; boundary=x",
    ])
    func aFormPostIsJudgedAsEveryMethodItCouldBecome(contentType: String) async throws {
        // A form's _method field is in the body: POST /item could run the DELETE or PUT handler.
        let head = request("POST", "/item", headers: [("Content-Type", contentType)])
        let gate = try Self.gate()
        #expect(await runGate(gate, head).1.errorCode == "assertion_missing")
        #expect(gate.classify(head, client: "127.0.0.1").routeName == "item")
        // A form to a path with no method-restricted protected route stays where it is.
        let open = await runGate(gate, request("POST", "/public/form", headers: [("Content-Type", contentType)])).1
        #expect(open.forwardedHead?.headers["X-App-Attest-Status"] == "skipped")
    }

    // MARK: - Finding 3: the gateway's headers in check-only answers

    @Test func theCheckOnlyAnswerCarriesEveryGatewayHeaderAndTheRiskVerdict() throws {
        var forwarded = request("GET", "/v1/x")
        forwarded.headers.add(name: "X-App-Attest-Status", value: "verified")
        forwarded.headers.add(name: "X-App-Attest-Risk-Metric", value: "7")
        forwarded.headers.add(name: "X-App-Attest-Risk-Metric-Age", value: "120")
        forwarded.headers.add(name: "X-App-Attest-Risk-Exceeded", value: "5")
        forwarded.headers.add(name: "X-App-Attest-Token", value: "client.bearer.token")
        let answer = AuthzAnswer.allow(forwarded)
        #expect(answer.headers["X-App-Attest-Risk-Metric"] == "7")
        #expect(answer.headers["X-App-Attest-Risk-Metric-Age"] == "120")
        #expect(answer.headers["X-App-Attest-Risk-Exceeded"] == "5")
        // A client's bearer credential never reaches the upstream as if checked.
        #expect(answer.headers["X-App-Attest-Token"] == "")
        // Without a risk verdict the names are still there, empty: they overwrite a client's copy.
        let plain = AuthzAnswer.allow(request("GET", "/v1/x"))
        for entry in GatewayHeaderNamespace.entries where entry.role != .answer {
            #expect(plain.headers[entry.name] != nil, "\(entry.name) missing from the allowed answer")
        }
        #expect(plain.headers["X-App-Attest-Risk-Metric"] == "")
        let removed = plain.headers[AuthzAnswer.envoyHeadersToRemove] ?? ""
        #expect(removed.contains("x-app-attest-risk-metric"))
        #expect(removed.contains("x-app-attest-token"))
    }

    @Test func anUnknownHeaderInTheGatewaysNamespaceIsRefusedOnEveryDoor() async throws {
        await Self.expectEveryDoor(
            request("GET", "/public/x", headers: [("X-App-Attest-Trusted", "yes")]),
            .refused(code: "unknown_gateway_header"), gate: try Self.gate())
    }

    @Test func spoofedIdentityHeadersAreReplacedOnEveryDoor() async throws {
        let gate = try Self.gate()
        let spoofed = request(
            "GET", "/public/x",
            headers: [("X-App-Attest-Status", "verified"), ("X-App-Attest-Risk-Metric", "0")])
        let inline = await runGate(gate, spoofed).1
        #expect(inline.forwardedHead?.headers["X-App-Attest-Status"] == "skipped")
        #expect(inline.forwardedHead?.headers["X-App-Attest-Risk-Metric"] == nil)
        let check = await runGate(AuthzGate(inner: gate, pathPrefix: "/ext_authz"), AuthzGateTests.forwardAuth(spoofed))
        #expect(check.1.localResponse?.headers["X-App-Attest-Status"] == "skipped")
        #expect(check.1.localResponse?.headers["X-App-Attest-Risk-Metric"] == "")
    }

    // MARK: - Underscore spellings of the gateway's and the trust headers (found 29 Nov)

    /// A CGI or WSGI upstream reads each of these as a gateway or trust header. The `listen`
    /// parsers drop them (HTTPRequestParserTests, HTTP2RequestMappingTests); a check-only door
    /// cannot drop what its front forwards, and the rule in `RequestRules` refuses them whatever
    /// carries the request value, so every door here refuses.
    @Test(arguments: [
        ("x_app_attest_status", "verified"), ("X_App_Attest_Key_Id", "c3Bvb2ZlZA=="),
        ("X-App_Attest-Status", "verified"), ("x_app_assertion", "AAAA"), ("x_app_attest_foo", "1"),
        ("x_real_ip", "203.0.113.70"), ("X_Forwarded_Client_Cert", "By=spiffe://evil"),
        ("x_ssl_client_s_dn", "CN=admin"), ("x_client_cert", "x"), ("client_cert", ":AA==:"),
        ("client_cert-chain", ":AA==:"),
    ])
    func anUnderscoreSpellingOfAGatewayOrTrustHeaderIsRefusedOnEveryDoor(name: String, value: String) async throws {
        let gate = try Self.gate()
        await Self.expectEveryDoor(
            request("GET", "/public/x", headers: [(name, value)]), .refused(code: "underscore_gateway_header"),
            gate: gate)
        // On a protected route too, before any credential is looked at.
        await Self.expectEveryDoor(
            request("GET", "/v1/x", headers: [(name, value)]), .refused(code: "underscore_gateway_header"), gate: gate)
    }

    @Test(arguments: ["x_custom", "my_app_attest_status", "x_app_attest", "x_forwarded_client", "client_certs"])
    func otherUnderscoreNamesAreNotTheRulesBusiness(name: String) async throws {
        await Self.expectEveryDoor(
            request("GET", "/public/x", headers: [(name, "1")]), .allowed(status: "skipped"), gate: try Self.gate())
    }

    @Test func theUnderscoreRuleReadsEveryUnderscoreAsADash() {
        #expect(RequestRules.underscoreViolation("X-App-Attest-Status") == nil)
        #expect(RequestRules.underscoreViolation("x_app_attest_status")?.code == .underscoreGatewayHeader)
        #expect(RequestRules.underscoreViolation("X-App-Attest_Risk_Metric")?.code == .underscoreGatewayHeader)
        #expect(RequestRules.underscoreViolation("x-ssl_client-verify")?.code == .underscoreGatewayHeader)
        #expect(RequestRules.underscoreViolation("x_ssl_clientverify") == nil)
    }

    // MARK: - Finding 4: the low ones

    @Test func aDebugTokenWithAnAssertionIsAmbiguousOnEveryDoor() async throws {
        let device = try SimulatedDevice.generate()
        let signed = try EnforcementHarness.signed(device, counter: 1, method: "GET", target: "/v1/debug/x")
        var head = signed
        head.headers.add(name: "X-App-Attest-Debug-Token", value: "dbg_0123456789")
        await Self.expectEveryDoor(head, .refused(code: "credentials_ambiguous"), gate: try Self.gate())
        var token = request("GET", "/v1/debug/x", headers: [("X-App-Attest-Token", "t")])
        token.headers.add(name: "X-App-Attest-Debug-Token", value: "dbg_0123456789")
        await Self.expectEveryDoor(token, .refused(code: "credentials_ambiguous"), gate: try Self.gate())
    }

    @Test(arguments: ["x:80:80", "x:", "[::1]:80:80", "[::1", ":80", "x:123456"])
    func aHostWithMoreThanOnePortIsRefusedOnEveryDoor(host: String) async throws {
        let head = HTTPRequestHead(method: "GET", target: "/public/x", headers: HTTPHeaders([("Host", host)]))
        let gate = try Self.gate()
        #expect(Self.verdict(inline: await runGate(gate, head).1) == .refused(code: "invalid_host"))
        var check = AuthzGateTests.forwardAuth(head)
        check.headers.remove(name: "X-Forwarded-Host")
        check.headers.add(name: "X-Forwarded-Host", value: host)
        let authz = AuthzGate(inner: gate, pathPrefix: "/ext_authz")
        #expect(Self.verdict(check: await runGate(authz, check).1) == .refused(code: "invalid_host"))
    }

    @Test(arguments: ["api.example", "api.example:8443", "[::1]:80", "[2001:db8::1]", "127.0.0.1:80"])
    func aHostWithOnePortOrNoneIsAccepted(host: String) async throws {
        let head = HTTPRequestHead(method: "GET", target: "/public/x", headers: HTTPHeaders([("Host", host)]))
        #expect(Self.verdict(inline: await runGate(try Self.gate(), head).1) == .allowed(status: "skipped"))
    }

    // MARK: - The strictness order

    @Test func strictnessRanksModeFirstThenWhatEachRouteDemands() {
        func route(_ mode: RoutePolicy.Mode, _ change: (inout RoutePolicy) -> Void = { _ in }) -> RouteStrictness {
            var route = RoutePolicy(name: "r", match: .init(), upstream: "api", mode: mode)
            change(&route)
            return RouteStrictness(route)
        }
        #expect(route(.off) < route(.monitor))
        #expect(route(.monitor) < route(.enforce))
        #expect(route(.enforce) { $0.enforcePercent = 50 } < route(.enforce))
        #expect(route(.enforce) < route(.enforce) { $0.challenge = .required })
        #expect(route(.enforce) { $0.allowDebugTokens = true } < route(.enforce))
        #expect(route(.enforce) { $0.fallback = .deviceCheck } < route(.enforce))
    }
}
