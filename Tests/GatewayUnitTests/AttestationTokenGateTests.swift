import Foundation
import GatewayTesting
import Simulator
import Testing

@testable import Enforcement
@testable import GateContract
@testable import GatewayIO
@testable import HTTP1
@testable import KeyStore
@testable import PolicyModel
@testable import RedisClient
@testable import Verification

/// `tokens:` and `accept_token:` end to end inside one gate: the policy block, the exchange of
/// an assertion for a token, the published keys, and routes that take the token instead of an
/// assertion (limited use included). Key files live in a scratch directory; no sockets.
@Suite struct AttestationTokenGateTests {
    /// Whole seconds, inside the simulator CA's validity (attestations verify at this time).
    static let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
    static let issuer = "https://attest.example.com"

    /// A directory with two token keys (`t1.pem`, `t2.pem`) and a subject secret.
    final class Keys {
        let directory: TemporaryDirectory
        var path: String { self.directory.path }

        init() throws {
            self.directory = try TemporaryDirectory()
            for name in ["t1", "t2"] {
                try SimulatedDevice.generate().privateKeyPEM.write(
                    toFile: self.directory.path + "/\(name).pem", atomically: true, encoding: .utf8)
            }
            try "subject-secret-of-at-least-32-bytes!".write(
                toFile: self.directory.path + "/subject", atomically: true, encoding: .utf8)
        }
    }

    static func policyText(active: String = "t1", extraRoute: String = "", environment: String = "production")
        -> String
    {
        """
        store: memory
        environment: \(environment)
        app_ids: ["\(EnforcementHarness.appID)"]
        upstreams: { api: { url: "http://127.0.0.1:9000" } }
        tokens:
          issuer: \(Self.issuer)
          active_kid: \(active)
          keys:
            - {kid: t1, key_file: t1.pem}
            - {kid: t2, key_file: t2.pem}
          subject_key_file: subject
          audiences:
            - {name: orders}
            - {name: payments, ttl: 2m}
          allow_debug_tokens: true
          clock_skew: 1s
        routes:
          - {name: orders, match: {path_prefix: /v1/orders}, upstream: api, accept_token: {audience: orders}}
          - {name: pay, match: {path_prefix: /v1/pay}, upstream: api, accept_token: {audience: payments, limited_use: true}}
          \(extraRoute)
          - {name: other, match: {path_prefix: /v1/}, upstream: api}
        """
    }

    static func parse(_ text: String, keys: Keys) throws(PolicyError) -> GatewayPolicy {
        try PolicyLoader.parse(text, sourcePath: keys.path + "/policies.yaml")
    }

    struct Fixture {
        let keys: Keys
        let policy: GatewayPolicy
        let gate: AttestGate
        let tokens: AttestationTokens
        let store = MemoryStore()

        init(
            active: String = "t1", keys: Keys? = nil, store: (any AttestStore)? = nil, extraRoute: String = "",
            environment: String = "production",
            clock: @escaping @Sendable () -> Date = { AttestationTokenGateTests.now }
        ) throws {
            self.keys = try keys ?? Keys()
            self.policy = try AttestationTokenGateTests.parse(
                AttestationTokenGateTests.policyText(active: active, extraRoute: extraRoute, environment: environment),
                keys: self.keys)
            self.tokens = try AttestationTokens.load(try #require(self.policy.tokens)).get()
            self.gate = try AttestGate(
                policy: self.policy, store: store ?? self.store,
                trustRootsPEM: [EnforcementHarness.authority.rootCertificatePEM],
                tokens: self.tokens, now: clock)
        }

        /// challenge → attest `device` on this gate.
        func attest(_ device: SimulatedDevice) async throws {
            let (_, challenged, _) = await runGate(self.gate, request("POST", "/app-attest/challenge"))
            let challenge = try #require(challenged.json?["challenge"] as? String)
            let body = try EnforcementHarness().attestBody(device, challenge: challenge)
            let (_, attested, _) = await runGate(self.gate, request("POST", "/app-attest/attest"), body: body)
            #expect(attested.status == 201, "\(attested.json ?? [:])")
        }

        /// `POST /app-attest/token` for `audience`, signed by `device` with `counter`.
        func exchange(_ device: SimulatedDevice, counter: UInt32, audience: String) async throws -> GateDecision {
            let body = Array(#"{"audience":"\#(audience)"}"#.utf8)
            let head = try EnforcementHarness.signed(
                device, counter: counter, method: "POST", target: "/app-attest/token", body: body)
            return await runGate(self.gate, head, body: body).1
        }

        func call(_ target: String, token: String) async -> GateDecision {
            await runGate(self.gate, request("GET", target, headers: [("Authorization", "Bearer " + token)])).1
        }
    }

    // MARK: - Policy

    @Test func theBlockDecodes() throws {
        let keys = try Keys()
        let policy = try Self.parse(Self.policyText(), keys: keys)
        let tokens = try #require(policy.tokens)
        #expect(tokens.issuer == Self.issuer && tokens.activeKID == "t1")
        #expect(tokens.keys.map(\.kid) == ["t1", "t2"])
        #expect(tokens.keys[0].keyFile == keys.path + "/t1.pem", "relative to the policy file")
        #expect(tokens.audiences == [.init(name: "orders", ttlSeconds: 300), .init(name: "payments", ttlSeconds: 120)])
        #expect(tokens.allowDebugTokens && tokens.clockSkewSeconds == 1)
        #expect(policy.routes[0].acceptToken == TokenAcceptance(audience: "orders", limitedUse: false))
        #expect(policy.routes[1].acceptToken == TokenAcceptance(audience: "payments", limitedUse: true))
        #expect(policy.routes[2].acceptToken == nil)
        let summary = PolicySummary.render(policy)
        #expect(summary.contains("issuer=\(Self.issuer) active_kid=t1 keys=t1:\(keys.path)/t1.pem"))
        #expect(summary.contains("audiences=orders:300s,payments:120s"))
        #expect(!summary.contains("subject-secret"), "the summary names files, never secrets")
        // The app learns from the policy document which routes take which token.
        let document = try #require(
            try JSONSerialization.jsonObject(with: Data(PolicyDocumentEndpoint.document(policy).utf8)) as? [String: Any]
        )
        let routes = try #require(document["routes"] as? [[String: Any]])
        #expect((routes[1]["accept_token"] as? [String: Any])?["audience"] as? String == "payments")
        #expect((routes[1]["accept_token"] as? [String: Any])?["limited_use"] as? Bool == true)
        #expect(routes[2]["accept_token"] is NSNull)
        #expect((document["endpoints"] as? [String: Any])?["token"] as? String == "/app-attest/token")
    }

    @Test func mistakesNameTheLineAndField() throws {
        let keys = try Keys()
        let good = Self.policyText()
        let cases: [(text: String, code: PolicyError.Code, field: String)] = [
            (
                good.replacingOccurrences(of: "active_kid: t1", with: "active_kid: t9"), .unknownSigningKey,
                "tokens.active_kid"
            ),
            (
                good.replacingOccurrences(of: "key_file: t2.pem", with: "key_file: subject"), .signingKeyInvalid,
                "tokens.keys[1].key_file"
            ),
            (
                good.replacingOccurrences(of: "subject_key_file: subject", with: "subject_key_file: t9"),
                .signingKeyInvalid, "tokens.subject_key_file"
            ),
            (
                good.replacingOccurrences(of: "issuer: \(Self.issuer)", with: "issuer: \(Self.issuer)/"), .invalidValue,
                "tokens.issuer"
            ),
            (good.replacingOccurrences(of: "ttl: 2m", with: "ttl: 2h"), .outOfRange, "tokens.audiences[1].ttl"),
            (
                good.replacingOccurrences(of: "audience: orders}", with: "audience: order}"), .invalidValue,
                "routes[0].accept_token"
            ),
            (
                good.replacingOccurrences(of: "clock_skew: 1s", with: "clock_skew: 10m"), .outOfRange,
                "tokens.clock_skew"
            ),
        ]
        for item in cases {
            do {
                _ = try Self.parse(item.text, keys: keys)
                Issue.record("accepted: \(item.field)")
            } catch {
                #expect(error.code == item.code, "\(error)")
                #expect(error.field == item.field, "\(error)")
                #expect(error.line > 0)
            }
        }
    }

    @Test func lintWarnsAboutDebugTokensAPlainIssuerAndAcceptTokenOnAnOffRoute() throws {
        let keys = try Keys()
        var warnings: [PolicyWarning] = []
        _ = try PolicyLoader.parse(
            Self.policyText(), sourcePath: keys.path + "/policies.yaml", warnings: &warnings)
        #expect(warnings.filter { $0.field.hasPrefix("tokens") }.map(\.code) == ["debug_tokens_in_production"])
        let text = Self.policyText(
            extraRoute:
                "- {name: open, match: {path: /open}, upstream: api, mode: off, accept_token: {audience: orders}}"
        )
        .replacingOccurrences(of: "issuer: https://", with: "issuer: http://")
        .replacingOccurrences(of: "allow_debug_tokens: true", with: "allow_debug_tokens: false")
        warnings = []
        _ = try PolicyLoader.parse(text, sourcePath: keys.path + "/policies.yaml", warnings: &warnings)
        let found = warnings.filter { $0.field.hasPrefix("tokens") || $0.field.hasSuffix("accept_token") }
        #expect(found.map(\.code) == ["token_issuer_not_https", "setting_without_effect"], "\(warnings)")
        warnings = []
        let checked = Self.policyText(
            extraRoute:
                "- {name: store, match: {path: /store}, upstream: api, max_risk_metric: 3, accept_token: {audience: orders}}"
        )
        _ = try PolicyLoader.parse(checked, sourcePath: keys.path + "/policies.yaml", warnings: &warnings)
        #expect(warnings.filter { $0.code == "token_skips_route_checks" }.map(\.field) == ["routes[2].accept_token"])
        #expect(found.map(\.field) == ["tokens.issuer", "routes[2].accept_token"])
    }

    // MARK: - Issuance and published keys

    @Test func aVerifiedAssertionIsExchangedForAToken() async throws {
        let fixture = try Fixture()
        let device = try SimulatedDevice.generate()
        try await fixture.attest(device)
        let decision = try await fixture.exchange(device, counter: 1, audience: "payments")
        #expect(decision.status == 200, "\(decision.json ?? [:])")
        #expect(decision.localResponse?.headers["Cache-Control"] == "no-store")
        let json = try #require(decision.json)
        #expect(json["token_type"] as? String == "Bearer" && json["expires_in"] as? Int == 120)
        let token = try #require(json["token"] as? String)
        let jws = try CompactJWS(token)
        #expect(jws.header.kid == "t1" && jws.header.alg == "ES256")
        let claims = try jws.claims()
        let keyID = Data(device.keyID).base64EncodedString()
        #expect(claims.issuer == Self.issuer && claims.audience == ["payments"])
        #expect(claims.expiresAt - claims.issuedAt == 120 && claims.issuedAt == Int64(Self.now.timeIntervalSince1970))
        #expect(
            claims.appID == EnforcementHarness.appID && claims.platform == "ios" && claims.environment == "production")
        #expect(claims.subject == fixture.tokens.subject(for: keyID))
        #expect(!claims.subject.contains(keyID) && claims.subject != Base64URL.encode(device.keyID), "never the key ID")
        // The same assertion again: its counter is spent.
        #expect(try await fixture.exchange(device, counter: 1, audience: "payments").errorCode == "counter_replay")
        #expect(
            try await fixture.exchange(device, counter: 2, audience: "unknown").errorCode == "token_audience_unknown")
    }

    @Test func anUnattestedOrUnsignedExchangeGetsNoToken() async throws {
        let fixture = try Fixture()
        let stranger = try SimulatedDevice.generate()
        #expect(try await fixture.exchange(stranger, counter: 1, audience: "orders").errorCode == "unknown_key")
        let body = Array(#"{"audience":"orders"}"#.utf8)
        let (_, bare, _) = await runGate(fixture.gate, request("POST", "/app-attest/token"), body: body)
        #expect(bare.errorCode == "assertion_missing")
        // The assertion covers the body: another audience than the one signed fails.
        let device = try SimulatedDevice.generate()
        try await fixture.attest(device)
        let head = try EnforcementHarness.signed(
            device, counter: 1, method: "POST", target: "/app-attest/token", body: body)
        let swapped = Array(#"{"audience":"payments"}"#.utf8)
        #expect(await runGate(fixture.gate, head, body: swapped).1.errorCode == "invalid_signature")
    }

    @Test func theKeySetAndDiscoveryArePublishedCacheable() async throws {
        let fixture = try Fixture()
        let (_, keys, _) = await runGate(fixture.gate, request("GET", "/.well-known/jwks.json"))
        #expect(keys.status == 200 && keys.localResponse?.headers["Cache-Control"] == "public, max-age=300")
        let set = try #require(keys.json?["keys"] as? [[String: Any]])
        #expect(set.map { $0["kid"] as? String } == ["t1", "t2"])
        #expect(set.allSatisfy { $0["kty"] as? String == "EC" && $0["alg"] as? String == "ES256" && $0["d"] == nil })
        let (_, discovery, _) = await runGate(fixture.gate, request("GET", "/.well-known/openid-configuration"))
        #expect(discovery.json?["issuer"] as? String == Self.issuer)
        #expect(discovery.json?["jwks_uri"] as? String == Self.issuer + "/.well-known/jwks.json")
        let (_, posted, _) = await runGate(fixture.gate, request("POST", "/.well-known/jwks.json"))
        #expect(posted.status == 405)
    }

    // MARK: - Routes that accept tokens

    @Test func aRouteAcceptsItsAudiencesTokenInsteadOfAnAssertion() async throws {
        let fixture = try Fixture()
        let device = try SimulatedDevice.generate()
        try await fixture.attest(device)
        let orders = try #require(
            try await fixture.exchange(device, counter: 1, audience: "orders").json?["token"] as? String)
        let passed = await fixture.call("/v1/orders/42", token: orders)
        let forwarded = try #require(passed.forwardedHead)
        #expect(forwarded.headers["X-App-Attest-Status"] == "token")
        #expect(forwarded.headers["X-App-Attest-App-Id"] == EnforcementHarness.appID)
        #expect(passed.logInfo.verdict == .token)
        // Reusable until it expires (not limited use).
        #expect(await fixture.call("/v1/orders/42", token: orders).forwardedHead != nil)
        // Another route's audience, and a route that takes no token.
        let wrong = await fixture.call("/v1/pay", token: orders)
        #expect(wrong.status == 403 && wrong.errorCode == "token_audience_mismatch")
        #expect(await fixture.call("/v1/other", token: orders).errorCode == "assertion_missing")
        #expect(await fixture.call("/v1/orders", token: orders + "x").errorCode == "token_malformed")
        #expect(await fixture.call("/v1/orders", token: "a.b.c").errorCode == "token_malformed")
    }

    @Test func theBearerTokenIsReadStrictly() {
        func bearer(_ values: [String]) -> String? {
            TokenRouteCheck.bearerToken(request("GET", "/v1/orders", headers: values.map { ("Authorization", $0) }))
        }
        #expect(bearer(["Bearer a.b.c"]) == "a.b.c")
        #expect(bearer(["bearer a.b.c"]) == "a.b.c", "the scheme is case-insensitive")
        #expect(bearer(["Basic dXNlcjpwYXNz"]) == nil)
        #expect(bearer(["Bearer "]) == nil)
        #expect(bearer(["Bearer a.b.c", "Bearer d.e.f"]) == nil, "two tokens: none is chosen")
    }

    @Test func anAssertionOnATokenRouteIsJudgedAsAnAssertion() async throws {
        let fixture = try Fixture()
        let device = try SimulatedDevice.generate()
        try await fixture.attest(device)
        // The app's own session in Authorization does not make it a token request.
        let head = try EnforcementHarness.signed(
            device, counter: 1, method: "GET", target: "/v1/orders/7",
            extraHeaders: [("Authorization", "Bearer app-session-not-a-jwt")])
        let decision = await runGate(fixture.gate, head, body: []).1
        #expect(decision.forwardedHead?.headers["X-App-Attest-Status"] == "verified", "\(decision.json ?? [:])")
        #expect(decision.forwardedHead?.headers["Authorization"] == "Bearer app-session-not-a-jwt")
    }

    @Test func aLimitedUseTokenFailsClosedWhenTheStoreCannotConsumeIt() async throws {
        let store = FaultInjectingStore(wrapping: MemoryStore())
        let fixture = try Fixture(store: store)
        let device = try SimulatedDevice.generate()
        try await fixture.attest(device)
        let pay = try #require(
            try await fixture.exchange(device, counter: 1, audience: "payments").json?["token"] as? String)
        store.set(.fail(StoreError(.unavailable, "injected")), for: .putChallenge)
        let refused = await fixture.call("/v1/pay", token: pay)
        #expect(refused.status == 503 && refused.errorCode == "store_error")
        store.set(nil, for: .putChallenge)
        #expect(await fixture.call("/v1/pay", token: pay).forwardedHead != nil, "not consumed by the failed try")
    }

    @Test func aRoutesAppValidationHoldsForTokens() async throws {
        let fixture = try Fixture(
            extraRoute:
                "- {name: store, match: {path_prefix: /v1/store}, upstream: api, app_validation: {categories: [app_store], when_absent: deny}, accept_token: {audience: orders}}"
        )
        let device = try SimulatedDevice.generate()
        try await fixture.attest(device)
        let token = try #require(
            try await fixture.exchange(device, counter: 1, audience: "orders").json?["token"] as? String)
        // This simulated device writes no launch validation (as iOS 26): the token carries none.
        #expect(try CompactJWS(token).claims().validationCategory == nil)
        let refused = await fixture.call("/v1/store/buy", token: token)
        #expect(refused.status == 403 && refused.errorCode == "validation_category_refused", "\(refused.json ?? [:])")
        #expect(await fixture.call("/v1/orders/1", token: token).forwardedHead != nil)
    }

    @Test func aLimitedUseTokenPassesOnce() async throws {
        let fixture = try Fixture()
        let device = try SimulatedDevice.generate()
        try await fixture.attest(device)
        let pay = try #require(
            try await fixture.exchange(device, counter: 1, audience: "payments").json?["token"] as? String)
        #expect(await fixture.call("/v1/pay", token: pay).forwardedHead != nil)
        let again = await fixture.call("/v1/pay", token: pay)
        #expect(again.status == 401 && again.errorCode == "token_replayed")
    }

    @Test func concurrentCopiesOfALimitedUseTokenPassOnceInTheMemoryStore() async throws {
        let fixture = try Fixture()
        let device = try SimulatedDevice.generate()
        try await fixture.attest(device)
        let pay = try #require(
            try await fixture.exchange(device, counter: 1, audience: "payments").json?["token"] as? String)
        let gate = fixture.gate
        let head = request("GET", "/v1/pay", headers: [("Authorization", "Bearer " + pay)])
        let forwarded = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<32 { group.addTask { await runGate(gate, head).1.forwardedHead != nil } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(forwarded == 1)
    }

    @Test func anExpiredTokenAndAnotherGatewaysTokenAreRefused() async throws {
        let issued = try Fixture()
        let device = try SimulatedDevice.generate()
        try await issued.attest(device)
        let token = try #require(
            try await issued.exchange(device, counter: 1, audience: "orders").json?["token"] as? String)
        let later = try Fixture(keys: issued.keys, clock: { AttestationTokenGateTests.now.addingTimeInterval(301) })
        #expect(await later.call("/v1/orders", token: token).errorCode == "token_expired")
        let stranger = try Fixture()
        #expect(await stranger.call("/v1/orders", token: token).errorCode == "token_signature_invalid")
        // Same keys, a policy that now accepts only development keys: the production token is refused.
        let development = try Fixture(keys: issued.keys, environment: "development")
        #expect(await development.call("/v1/orders", token: token).errorCode == "environment_mismatch")
    }

    @Test func aRotationKeepsTheOldKeysTokensValid() async throws {
        let before = try Fixture(active: "t1")
        let device = try SimulatedDevice.generate()
        try await before.attest(device)
        let old = try #require(
            try await before.exchange(device, counter: 1, audience: "orders").json?["token"] as? String)
        let after = try Fixture(active: "t2", keys: before.keys, store: before.store)
        #expect(await after.call("/v1/orders", token: old).forwardedHead != nil, "t1 is still listed")
        let fresh = try #require(
            try await after.exchange(device, counter: 2, audience: "orders").json?["token"] as? String)
        #expect(try CompactJWS(fresh).header.kid == "t2")
    }

    @Test func aDebugTokenIsExchangedWhereThePolicyAllowsIt() async throws {
        let fixture = try Fixture(
            extraRoute:
                "- {name: ci, match: {path_prefix: /v1/ci}, upstream: api, allow_debug_tokens: true, accept_token: {audience: orders}}"
        )
        let secret = DebugTokens.generate()
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            fixture.store.createDebugToken(
                DebugTokenRecord(name: "ci", createdAt: Self.now, expiresAt: Self.now.addingTimeInterval(3600)),
                digest: DebugTokens.digest(secret)
            ) { result in continuation.resume(with: result.map { _ in () }.mapError { $0 as any Error }) }
        }
        let body = Array(#"{"audience":"orders"}"#.utf8)
        let head = request("POST", "/app-attest/token", headers: [("X-App-Attest-Debug-Token", secret)])
        let decision = await runGate(fixture.gate, head, body: body).1
        let token = try #require(decision.json?["token"] as? String, "\(decision.json ?? [:])")
        #expect(try CompactJWS(token).claims().platform == "debug")
        // Worth no more than the debug token: refused where the route does not allow debug tokens.
        let refused = await fixture.call("/v1/orders", token: token)
        #expect(refused.status == 403 && refused.errorCode == "debug_token_not_allowed")
        #expect(await fixture.call("/v1/ci/run", token: token).forwardedHead?.headers["X-App-Attest-Status"] == "token")
    }
}
