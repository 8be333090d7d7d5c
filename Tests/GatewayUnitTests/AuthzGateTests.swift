import Foundation
import GatewayTesting
import Simulator
import Testing

@testable import Enforcement
@testable import GateContract
@testable import HTTP1

/// The check-only gate over the real inline gate (MemoryStore, simulator CA, real verifiers):
/// the same verification and state, answered instead of forwarded.
@Suite struct AuthzGateTests {
    static func authz(_ h: EnforcementHarness) -> AuthzGate {
        AuthzGate(inner: h.gate, pathPrefix: "/ext_authz")
    }

    /// A forward-auth check of `signed` (as nginx, Caddy or Traefik send it).
    static func forwardAuth(_ signed: HTTPRequestHead, extra: [(String, String)] = []) -> HTTPRequestHead {
        var headers = HTTPHeaders([
            ("Host", "authz.internal"), ("X-Forwarded-Method", signed.method), ("X-Forwarded-Uri", signed.target),
            ("X-Forwarded-Host", "api.example"),
        ])
        for field in signed.headers where !field.name.caseInsensitiveEquals("Host") {
            headers.add(name: field.name, value: field.value)
        }
        for (name, value) in extra { headers.add(name: name, value: value) }
        return HTTPRequestHead(method: "GET", target: "/forward-auth", headers: headers)
    }

    static func answer(_ decision: GateDecision) -> LocalResponse? { decision.localResponse }

    @Test func verifiedForwardAuthCheckAnswers200WithTheIdentityAndOverwritesSpoofedOnes() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let gate = Self.authz(h)
        let signed = try EnforcementHarness.signed(device, counter: 1, method: "GET", target: "/v1/items?page=2")
        let check = Self.forwardAuth(
            signed, extra: [("X-App-Attest-App-Id", "FORGED1234.com.evil"), ("X-App-Attest-Bundle-Version", "9.9")])
        let (classification, decision, probe) = await runGate(gate, check)
        #expect(classification.routeName == "api")
        let answer = try #require(Self.answer(decision))
        #expect(answer.status == 200)
        #expect(answer.headers["X-App-Attest-Status"] == "verified")
        #expect(answer.headers["X-App-Attest-App-Id"] == EnforcementHarness.appID)
        #expect(answer.headers["X-App-Attest-Key-Id"] == Data(device.keyID).base64EncodedString())
        #expect(answer.headers["X-App-Attest-Counter"] == "1")
        #expect(answer.headers["X-App-Attest-Bundle-Version"] == "")
        #expect(answer.headers["X-App-Assertion"] == "")
        #expect(decision.logInfo.verdict == .verified)
        #expect(probe.count == 1)

        // The same assertion again: the counter in the shared store refuses it.
        let (_, replay, _) = await runGate(gate, check)
        #expect(replay.status == 401)
        #expect(replay.errorCode == "counter_replay")
        #expect(replay.localResponse?.headers["X-App-Attest-Error"] == "counter_replay")
        // And inline mode shares that state: the next counter passes there.
        let next = try EnforcementHarness.signed(device, counter: 2, method: "GET", target: "/v1/items?page=2")
        #expect(await runGate(h.gate, next).1.forwardedHead?.headers["X-App-Attest-Status"] == "verified")
        // A check for another target than the one signed (tampered) fails the signature.
        let moved = Self.forwardAuth(
            try EnforcementHarness.signed(device, counter: 3, method: "GET", target: "/v1/items?page=3"))
        var tampered = moved
        tampered.headers.remove(name: "X-Forwarded-Uri")
        tampered.headers.add(name: "X-Forwarded-Uri", value: "/v1/items?page=4")
        let (_, refused, _) = await runGate(gate, tampered)
        #expect(refused.status == 401)
        #expect(refused.errorCode == "invalid_signature")
    }

    @Test func forwardAuthRefusesRequestsWhoseAssertionCoversABody() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let gate = Self.authz(h)
        let post = try EnforcementHarness.signed(device, counter: 1, method: "POST", target: "/v1/items")
        let (_, decision, _) = await runGate(gate, Self.forwardAuth(post))
        #expect(decision.status == 403)
        #expect(decision.errorCode == "authz_body_required")
        // binding: body signs the body itself, whatever the method.
        let plain = try EnforcementHarness.signed(device, counter: 2, method: "GET", target: "/v1/plain/x")
        #expect(await runGate(gate, Self.forwardAuth(plain)).1.errorCode == "authz_body_required")
        // A refusal before verification consumed nothing: counter 1 still passes inline.
        let inline = try EnforcementHarness.signed(device, counter: 1, method: "GET", target: "/v1/items")
        #expect(await runGate(h.gate, inline).1.forwardedHead != nil)
    }

    @Test func missingCredentialsOffRoutesMonitorRoutesEndpointsAndNoRoute() async throws {
        let h = try EnforcementHarness()
        let gate = Self.authz(h)
        let missing = await runGate(gate, Self.forwardAuth(request("GET", "/v1/items"))).1
        #expect(missing.status == 401)
        #expect(missing.errorCode == "assertion_missing")
        #expect(missing.localResponse?.headers["X-App-Attest-Error"] == "assertion_missing")

        let open = try #require(
            await runGate(
                gate, Self.forwardAuth(request("GET", "/public/a", headers: [("X-App-Attest-Status", "verified")]))
            ).1.localResponse)
        #expect(open.status == 200)
        #expect(open.headers["X-App-Attest-Status"] == "skipped")
        #expect(open.headers["X-App-Attest-Key-Id"] == "")

        let watched = try #require(await runGate(gate, Self.forwardAuth(request("GET", "/v1/watch/a"))).1.localResponse)
        #expect(watched.status == 200)
        #expect(watched.headers["X-App-Attest-Status"] == "failed; reason=assertion_missing")

        let endpoint = await runGate(gate, Self.forwardAuth(request("POST", "/app-attest/challenge"))).1
        #expect(endpoint.status == 404)
        #expect(endpoint.errorCode == "authz_endpoint")
        let nowhere = await runGate(gate, Self.forwardAuth(request("GET", "/elsewhere"))).1
        #expect(nowhere.status == 404)
        #expect(nowhere.errorCode == "no_route")

        let unknown = await runGate(gate, request("GET", "/v1/items")).1
        #expect(unknown.status == 400)
        #expect(unknown.errorCode == "authz_unrecognized_request")
    }

    /// Envoy with `with_request_body`: the body arrives on the check and is verified.
    @Test func envoyCheckWithTheBodyVerifiesItAndRefusesAPartialOne() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let gate = Self.authz(h)
        let body = Array("{\"item\":42}".utf8)
        var signed = try EnforcementHarness.signed(device, counter: 1, method: "POST", target: "/v1/items", body: body)
        signed.target = "/ext_authz/v1/items"
        signed.headers.add(name: "Content-Length", value: String(body.count))
        let (classification, decision, _) = await runGate(gate, signed, body: body)
        #expect(classification.bufferBodyUpTo == 1024)
        #expect(decision.localResponse?.status == 200)
        #expect(decision.localResponse?.headers["X-App-Attest-Status"] == "verified")

        var partial = try EnforcementHarness.signed(device, counter: 2, method: "POST", target: "/v1/items", body: body)
        partial.target = "/ext_authz/v1/items"
        partial.headers.add(name: "x-envoy-auth-partial-body", value: "true")
        let refused = await runGate(gate, partial, body: Array(body.prefix(4))).1
        #expect(refused.status == 403)
        #expect(refused.errorCode == "authz_body_required")
    }
}
