import Foundation
import Testing

@testable import AppAttestClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The jobs `AttestedClient` delegates to, each on its own: the retry rules, the policy cache
/// and its route after a refusal, and what a signed request carries. No sockets.
@Suite struct RequestRetryRulesTests {
    private static func refusal(_ code: AttestedClientError.Code, retryAfter: Duration? = nil) -> AttestedClientError {
        AttestedClientError(code, "", status: code.gatewayStatus, retryAfter: retryAfter)
    }

    /// The actions for successive refusals of signed tries of one request.
    private static func signed(
        _ rules: inout RequestRetryRules,
        _ codes: [AttestedClientError.Code]
    ) -> [RequestRetryRules.Action] {
        codes.map { rules.afterSignedRefusal(Self.refusal($0), jitter: 1) }
    }

    @Test func eachRemedyIsTriedOncePerRequest() {
        var rules = RequestRetryRules(backoff: RetryPolicy())
        let actions = Self.signed(
            &rules,
            [
                .counterReplay, .counterReplay, .challengeInvalid, .challengeInvalid, .challengeMissing,
                .assertionMissing,
            ]
        )
        #expect(actions == [.retry, .fail, .retry, .fail, .refreshPolicy, .fail])
    }

    @Test func oneNewKeyPerRequestWhicheverSideFoundTheKeyUnusable() {
        var gatewayFirst = RequestRetryRules(backoff: RetryPolicy())
        #expect(Self.signed(&gatewayFirst, [.unknownKey]) == [.newKey])
        let again = gatewayFirst.newKeyAfterInvalidKey()
        #expect(!again)

        var appleFirst = RequestRetryRules(backoff: RetryPolicy())
        let first = appleFirst.newKeyAfterInvalidKey()
        #expect(first)
        #expect(Self.signed(&appleFirst, [.unknownKey]) == [.fail])
    }

    @Test func aRevokedKeyIsFinalAndOtherRefusalsAreThrown() {
        var rules = RequestRetryRules(backoff: RetryPolicy())
        #expect(Self.signed(&rules, [.revokedKey, .invalidSignature, .bodyTooLarge]) == [.revoke, .fail, .fail])
    }

    @Test func unforwardedRefusalsBackOffUntilTheAttemptsAreSpent() {
        let policy = RetryPolicy(maximumAttempts: 3, initialDelay: .seconds(1), maximumDelay: .seconds(10))
        var rules = RequestRetryRules(backoff: policy)
        #expect(Self.signed(&rules, [.storeError]) == [.backOff(.seconds(1))])
        // The challenge endpoint's 503 and 429 draw on the same attempts as the gateway's refusals.
        let rateLimited = rules.backOff(after: Self.refusal(.rateLimited, retryAfter: .seconds(5)), jitter: 1)
        #expect(rateLimited == .seconds(5))
        #expect(Self.signed(&rules, [.bodyBudgetExhausted]) == [.fail])
        let spent = rules.backOff(after: Self.refusal(.storeError), jitter: 1)
        #expect(spent == nil)
    }

    @Test func anUnsignedRequestRefreshesThePolicyOnlyWhenTheGatewayAskedForCredentials() {
        var rules = RequestRetryRules(backoff: RetryPolicy())
        let actions = [AttestedClientError.Code.noRoute, .challengeMissing, .assertionMissing].map {
            rules.afterUnsignedRefusal(Self.refusal($0))
        }
        #expect(actions == [.fail, .refreshPolicy, .fail])
    }
}

@Suite struct PolicyCacheTests {
    /// A gateway serving only its policy document, answering from a script.
    final class PolicyGateway: HTTPTransport, @unchecked Sendable {
        private let lock = NSLock()
        private var answers: [(status: Int, headers: [String: String], body: String)] = []
        private var requests: [URLRequest] = []

        var sent: [URLRequest] { self.lock.withLock { self.requests } }

        func answer(_ status: Int, _ headers: [String: String] = [:], _ body: String = "") {
            self.lock.withLock { self.answers.append((status, headers, body)) }
        }

        func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
            let next = self.lock.withLock {
                self.requests.append(request)
                return self.answers.isEmpty ? nil : self.answers.removeFirst()
            }
            guard let next else { throw URLError(.cannotConnectToHost) }
            let url = try #require(request.url)
            let response = try #require(
                HTTPURLResponse(url: url, statusCode: next.status, httpVersion: nil, headerFields: next.headers))
            return (Data(next.body.utf8), response)
        }
    }

    final class ManualClock: AttestClock, @unchecked Sendable {
        private let lock = NSLock()
        private var current = Date(timeIntervalSince1970: 1_800_000_000)
        func now() -> Date { self.lock.withLock { self.current } }
        func advance(_ seconds: TimeInterval) { self.lock.withLock { self.current += seconds } }
        func sleep(for duration: Duration) async throws {}
    }

    static let document = """
        {"version":1,"endpoints":{"challenge":"/c","attest":"/a","devicecheck":"/d"},
         "routes":[{"match":{"path_prefix":"/v1"},"mode":"enforce","challenge":"required"}]}
        """

    private func cache(_ gateway: PolicyGateway, _ clock: ManualClock) -> PolicyCache {
        PolicyCache(
            api: GatewayAPI(gateway: URL(string: "https://gateway.test/base?x=1")!, transport: gateway),
            clock: clock,
            path: "/app-attest/policy",
            retryInterval: .seconds(30),
            fallbackRoute: GatewayPolicyDocument.Route(mode: .monitor)
        )
    }

    @Test func cachedForMaxAgeThenRevalidatedWithItsETag() async throws {
        let gateway = PolicyGateway()
        let clock = ManualClock()
        let cache = self.cache(gateway, clock)
        gateway.answer(200, ["Cache-Control": "public, max-age=120", "ETag": "\"p1\""], Self.document)
        #expect(await cache.route(method: "GET", target: "/v1/x")?.challenge == .required)
        #expect(await cache.route(method: "GET", target: "/other") == nil)
        #expect(gateway.sent.count == 1)
        #expect(gateway.sent.first?.url?.absoluteString == "https://gateway.test/app-attest/policy")
        #expect(await cache.challengePath == "/c")
        #expect(await cache.attestPath == "/a")
        #expect(await cache.deviceCheckPath == "/d")

        clock.advance(121)
        gateway.answer(304, ["Cache-Control": "max-age=60"])
        #expect(await cache.route(method: "GET", target: "/v1/x")?.challenge == .required)
        #expect(gateway.sent.count == 2)
        #expect(gateway.sent.last?.value(forHTTPHeaderField: "If-None-Match") == "\"p1\"")
        clock.advance(59)
        _ = await cache.route(method: "GET", target: "/v1/x")
        #expect(gateway.sent.count == 2)
    }

    @Test func withoutADocumentTheFallbackRouteAndNoRetryBeforeTheInterval() async {
        let gateway = PolicyGateway()
        let clock = ManualClock()
        let cache = self.cache(gateway, clock)
        #expect(await cache.route(method: "GET", target: "/v1/x")?.mode == .monitor)
        #expect(await cache.challengePath == "/app-attest/challenge")
        clock.advance(29)
        #expect(await cache.route(method: "GET", target: "/v1/x")?.mode == .monitor)
        #expect(gateway.sent.count == 1)

        clock.advance(2)
        gateway.answer(200, [:], #"{"version":2,"endpoints":{"challenge":"/c","attest":"/a"},"routes":[]}"#)
        #expect(await cache.route(method: "GET", target: "/v1/x")?.mode == .monitor, "unknown version: unused")
        #expect(gateway.sent.count == 2)
    }

    @Test func aFailedRefreshKeepsTheStaleDocument() async {
        let gateway = PolicyGateway()
        let clock = ManualClock()
        let cache = self.cache(gateway, clock)
        gateway.answer(200, ["Cache-Control": "max-age=10"], Self.document)
        #expect(await cache.document(force: false) != nil)
        clock.advance(11)
        gateway.answer(500)
        #expect(await cache.route(method: "GET", target: "/v1/x")?.challenge == .required)
        #expect(await cache.document(force: true)?.endpoints.challenge == "/c", "unreachable: still stale")
    }

    @Test func theRouteAfterARefusalIsAtLeastAsStrictAsTheGatewayAsked() {
        let missing = AttestedClientError(.challengeMissing, "")
        let unsigned = AttestedClientError(.assertionMissing, "")
        let off = GatewayPolicyDocument.Route(mode: .off)
        let enforced = GatewayPolicyDocument.Route(mode: .enforce)
        var challenged = enforced
        challenged.challenge = .required
        let fallback = GatewayPolicyDocument.Route(mode: .monitor)

        // The refreshed document explains the refusal: its route.
        #expect(
            PolicyCache.protectedRoute(after: unsigned, refreshed: enforced, was: off, fallback: fallback) == enforced)
        #expect(
            PolicyCache.protectedRoute(after: missing, refreshed: challenged, was: enforced, fallback: fallback)
                == challenged)
        // It does not (unchanged, still off, or no challenge after a 428): the previous route, stricter.
        #expect(
            PolicyCache.protectedRoute(after: unsigned, refreshed: off, was: off, fallback: fallback).mode == .enforce)
        let stricter = PolicyCache.protectedRoute(
            after: missing, refreshed: enforced, was: enforced, fallback: fallback)
        #expect(stricter.mode == .enforce && stricter.challenge == .required)
        // No previous route: the fallback, made enforcing.
        #expect(
            PolicyCache.protectedRoute(after: unsigned, refreshed: nil, was: nil, fallback: fallback).mode == .enforce)
    }

    @Test func maxAgeIsReadFromCacheControl() {
        #expect(PolicyCache.maxAge("public, max-age=300") == 300)
        #expect(PolicyCache.maxAge("Max-Age=5, no-transform") == 5)
        #expect(PolicyCache.maxAge("no-cache") == nil)
        #expect(PolicyCache.maxAge(nil) == nil)
    }
}

@Suite struct RequestSignerTests {
    private func route(_ binding: GatewayPolicyDocument.Route.Binding) -> GatewayPolicyDocument.Route {
        var route = GatewayPolicyDocument.Route(mode: .enforce)
        route.binding = binding
        return route
    }

    @Test func requestBindingCarriesTheChallengeInAHeaderAndDropsTheCallersCredentials() throws {
        var original = URLRequest(url: URL(string: "https://api.example.com/v1/orders?x=1")!)
        original.httpMethod = "POST"
        original.httpBody = Data(#"{"item":"sku-42"}"#.utf8)
        original.setValue("spoofed", forHTTPHeaderField: AttestedClient.Header.assertion)
        original.setValue("other", forHTTPHeaderField: AttestedClient.Header.deviceCheckToken)
        let (request, clientData) = try RequestSigner.prepare(
            original, method: "POST", target: "/v1/orders?x=1", route: self.route(.request), challenge: "c1")
        #expect(request.value(forHTTPHeaderField: AttestedClient.Header.challenge) == "c1")
        #expect(request.value(forHTTPHeaderField: AttestedClient.Header.assertion) == nil)
        #expect(request.value(forHTTPHeaderField: AttestedClient.Header.deviceCheckToken) == nil)
        #expect(request.httpBody == original.httpBody)
        #expect(
            clientData
                == ClientData.request(
                    method: "POST", target: "/v1/orders?x=1", body: original.httpBody!, challenge: "c1"))
    }

    @Test func bodyBindingSignsTheBodyWithTheChallengeInside() throws {
        var original = URLRequest(url: URL(string: "https://api.example.com/v1/pay")!)
        original.httpBody = Data(#"{"amount":5}"#.utf8)
        var route = self.route(.body)
        route.challengeField = "nonce"
        let (request, clientData) = try RequestSigner.prepare(
            original, method: "POST", target: "/v1/pay", route: route, challenge: "c2")
        #expect(request.value(forHTTPHeaderField: AttestedClient.Header.challenge) == nil)
        #expect(request.httpBody == clientData)
        let object = try #require(try JSONSerialization.jsonObject(with: clientData) as? [String: Any])
        #expect(object["nonce"] as? String == "c2" && object["amount"] as? Int == 5)

        let (unchallenged, signed) = try RequestSigner.prepare(
            original, method: "POST", target: "/v1/pay", route: route, challenge: nil)
        #expect(signed == original.httpBody && unchallenged.httpBody == original.httpBody)
    }
}
