import GatewayTesting
import Testing

@testable import Enforcement
@testable import GateContract
@testable import HTTP1

/// Dialect detection and the original request's reconstruction, without sockets.
@Suite struct AuthzRequestTests {
    static let prefix = "/ext_authz"

    func rebuild(_ method: String, _ target: String, _ headers: [(String, String)]) -> Result<
        AuthzRequest, EnforcementError
    > {
        AuthzRequest.reconstruct(
            HTTPRequestHead(method: method, target: target, headers: HTTPHeaders(headers)), pathPrefix: Self.prefix)
    }

    func refusal(_ result: Result<AuthzRequest, EnforcementError>) -> String? {
        if case .failure(let error) = result { return error.code.rawValue }
        return nil
    }

    /// Envoy's HTTP service: `path_prefix` + the original path, the original method and headers.
    @Test func envoyCheckIsTheOriginalRequestUnderThePrefix() throws {
        let result = self.rebuild(
            "POST", "/ext_authz/v1/orders?page=2",
            [("Host", "api.example"), ("X-App-Assertion", "AAAA"), ("Content-Length", "11")])
        let request = try result.get()
        #expect(request.dialect == .envoy)
        #expect(request.head.method == "POST")
        #expect(request.head.target == "/v1/orders?page=2")
        #expect(request.head.headers["X-App-Assertion"] == "AAAA")
        #expect(request.head.headers["Content-Length"] == "11")
        #expect(!request.partialBody)
    }

    @Test func envoyPartialBodyIsNoticedAndItsHeaderDropped() throws {
        let partial = try self.rebuild("POST", "/ext_authz/v1/x", [("x-envoy-auth-partial-body", "true")]).get()
        #expect(partial.partialBody)
        #expect(partial.head.headers["x-envoy-auth-partial-body"] == nil)
        let whole = try self.rebuild("POST", "/ext_authz/v1/x", [("x-envoy-auth-partial-body", "false")]).get()
        #expect(!whole.partialBody)
    }

    /// Traefik, Caddy and nginx: the method, target and host come from X-Forwarded-*.
    @Test func forwardAuthCheckIsRebuiltFromTheForwardedFields() throws {
        let request = try self.rebuild(
            "GET", "/forward-auth",
            [
                ("Host", "authz.internal"), ("X-Forwarded-Method", "DELETE"), ("X-Forwarded-Uri", "/v1/items/7?x=1"),
                ("X-Forwarded-Host", "api.example"), ("X-Forwarded-Proto", "https"), ("X-App-Assertion", "AAAA"),
            ]
        ).get()
        #expect(request.dialect == .forwardAuth)
        #expect(request.head.method == "DELETE")
        #expect(request.head.target == "/v1/items/7?x=1")
        #expect(request.head.headers.values(for: "Host") == ["api.example"])
        #expect(request.head.headers["X-Forwarded-Method"] == nil)
        #expect(request.head.headers["X-Forwarded-Uri"] == nil)
        #expect(request.head.headers["X-Forwarded-Host"] == nil)
        #expect(request.head.headers["X-App-Assertion"] == "AAAA")
    }

    /// A request with the marks of both dialects (or half of one) is refused, never guessed at.
    @Test func ambiguousChecksAreRefused() {
        let cases: [(String, String, [(String, String)])] = [
            // Envoy's path with a client-smuggled X-Forwarded-Method.
            ("GET", "/ext_authz/v1/a", [("X-Forwarded-Method", "GET")]),
            ("GET", "/ext_authz/v1/a", [("X-Forwarded-Uri", "/public")]),
            // Half a forward-auth request.
            ("GET", "/check", [("X-Forwarded-Method", "GET")]),
            ("GET", "/check", [("X-Forwarded-Uri", "/v1/a")]),
            // Repeated fields: which one is the request?
            ("GET", "/check", [("X-Forwarded-Method", "GET"), ("X-Forwarded-Uri", "/a"), ("X-Forwarded-Uri", "/b")]),
            (
                "GET", "/check",
                [
                    ("X-Forwarded-Method", "GET"), ("X-Forwarded-Uri", "/a"), ("X-Forwarded-Host", "a"),
                    ("X-Forwarded-Host", "b"),
                ]
            ),
            // Not a method, not an origin-form target.
            ("GET", "/check", [("X-Forwarded-Method", "GE T"), ("X-Forwarded-Uri", "/a")]),
            ("GET", "/check", [("X-Forwarded-Method", ""), ("X-Forwarded-Uri", "/a")]),
            ("GET", "/check", [("X-Forwarded-Method", "GET"), ("X-Forwarded-Uri", "http://evil/a")]),
            ("GET", "/check", [("X-Forwarded-Method", "GET"), ("X-Forwarded-Uri", "/a b")]),
        ]
        for (method, target, headers) in cases {
            #expect(
                self.refusal(self.rebuild(method, target, headers)) == "authz_ambiguous_request", "\(target) \(headers)"
            )
        }
    }

    @Test func neitherDialectIsUnrecognized() {
        #expect(self.refusal(self.rebuild("GET", "/v1/a", [])) == "authz_unrecognized_request")
        // The prefix must be followed by `/`: /ext_authzfoo is not under /ext_authz.
        #expect(self.refusal(self.rebuild("GET", "/ext_authzfoo", [])) == "authz_unrecognized_request")
        #expect(self.refusal(self.rebuild("GET", "/ext_authz", [])) == "authz_unrecognized_request")
    }

    @Test func codesHaveTheirStatuses() {
        #expect(EnforcementError.Code.authzAmbiguousRequest.status == 400)
        #expect(EnforcementError.Code.authzUnrecognizedRequest.status == 400)
        #expect(EnforcementError.Code.authzBodyRequired.status == 403)
        #expect(EnforcementError.Code.authzEndpoint.status == 404)
    }

    /// The allow answer names every identity header, empty where inline mode sends none, and
    /// never echoes the app's credentials.
    @Test func allowAnswerCarriesEveryIdentityHeader() {
        var forwarded = HTTPRequestHead(method: "GET", target: "/v1/a")
        forwarded.headers.add(name: "X-App-Attest-Status", value: "verified")
        forwarded.headers.add(name: "X-App-Attest-Key-Id", value: "a2V5")
        forwarded.headers.add(name: "X-App-Assertion", value: "must-not-be-echoed")
        forwarded.headers.add(name: "Accept", value: "*/*")
        let answer = AuthzAnswer.allow(forwarded)
        #expect(answer.status == 200)
        #expect(answer.body.isEmpty)
        for name in AuthzAnswer.identityHeaderNames {
            #expect(answer.headers.values(for: name).count == 1, "\(name)")
        }
        #expect(answer.headers["X-App-Attest-Status"] == "verified")
        #expect(answer.headers["X-App-Attest-Key-Id"] == "a2V5")
        #expect(answer.headers["X-App-Assertion"] == "")
        #expect(answer.headers["X-App-Attest-App-Id"] == "")
        #expect(answer.headers["Accept"] == nil)
        let removed = Set(
            (answer.headers["x-envoy-auth-headers-to-remove"] ?? "").split(separator: ",").map(String.init))
        #expect(removed.contains("x-app-assertion"))
        #expect(removed.contains("x-app-attest-app-id"))
        #expect(!removed.contains("x-app-attest-status"))
        #expect(!removed.contains("x-app-attest-key-id"))
    }

    @Test func denialKeepsStatusAndBodyAndNamesItsCode() {
        let denial = AuthzAnswer.deny(EnforcementError(.counterReplay, "replayed").response)
        #expect(denial.status == 401)
        #expect(denial.headers["X-App-Attest-Error"] == "counter_replay")
        #expect(String(decoding: denial.body, as: UTF8.self).contains("\"counter_replay\""))
        // A 2xx can never leave as a denial: it would read as "allowed".
        let sneaky = AuthzAnswer.deny(LocalResponse(status: 200, body: Array("{}".utf8)))
        #expect(sneaky.status == 404)
        #expect(sneaky.headers["X-App-Attest-Error"] == "authz_endpoint")
        #expect(AuthzAnswer.errorCode(in: Array("{\"error\":\"x\\\"y\"}".utf8)) == nil)
        #expect(AuthzAnswer.errorCode(in: Array("not json".utf8)) == nil)
    }
}
