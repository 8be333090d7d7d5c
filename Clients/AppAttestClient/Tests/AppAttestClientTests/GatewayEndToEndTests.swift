import AppAttestClient
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The client against the real thing: `attest-gateway serve` (built at the repository root),
/// a real redis-server with AOF, scripts/upstream.py echoing what it received, and the
/// gateway's simulator (`attest-gateway sim`) as the device's App Attest service. One test at
/// a time: each starts its own processes on free loopback ports.
@Suite(.serialized)
struct GatewayEndToEndTests {
    private func withEnvironment(
        challengeTTLSeconds: Int = 300,
        _ body: (GatewayEnvironment) async throws -> Void
    ) async throws {
        let environment = try await GatewayEnvironment(challengeTTLSeconds: challengeTTLSeconds)
        defer { environment.shutDown() }
        try await body(environment)
    }

    private func get(_ target: String, on environment: GatewayEnvironment) -> URLRequest {
        URLRequest(url: environment.url(target))
    }

    @Test func firstRequestAttestsThenAsserts() async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator()
            let store = InMemoryKeyStore()
            let client = environment.client(service: service, keyStore: store)

            let (data, response) = try await client.data(for: self.get("/v1/items?page=2", on: environment))
            #expect(response.statusCode == 200)
            let echo = try Echo(data)
            #expect(echo.target == "/v1/items?page=2")
            #expect(echo.value("X-App-Attest-Status") == "verified")
            #expect(echo.value("X-App-Attest-App-Id") == GatewayEnvironment.appID)
            #expect(echo.value("X-App-Attest-Counter") == "1")
            let stored = try #require(try store.load())
            #expect(stored.state == .attested)
            #expect(echo.value("X-App-Attest-Key-Id") == stored.keyID)
            // The key ID was saved as pending BEFORE attestKey, then as attested.
            #expect(store.history.map(\.state) == [.pending, .attested])
            #expect(service.calls("generateKey") == 1)
            #expect(service.calls("attestKey") == 1)

            // Later requests only assert; a POST body is signed too.
            var post = URLRequest(url: environment.url("/v1/orders"))
            post.httpMethod = "POST"
            post.httpBody = Data(#"{"item":"sku-42","quantity":1}"#.utf8)
            let (postData, postResponse) = try await client.data(for: post)
            #expect(postResponse.statusCode == 200)
            let postEcho = try Echo(postData)
            #expect(postEcho.method == "POST")
            #expect(postEcho.value("X-App-Attest-Counter") == "2")
            #expect(service.calls("attestKey") == 1)

            // Off routes are sent as they are: no assertion spent.
            let (publicData, _) = try await client.data(for: self.get("/public/info", on: environment))
            #expect(try Echo(publicData).value("X-App-Attest-Status") == "skipped")
            #expect(service.calls("generateAssertion") == 2)
        }
    }

    /// 100 requests at once from one client: on a strict route (no counter window: the client
    /// serializes its assertions) and on a route whose policy document gives a window of 32
    /// (up to 32 in flight; out-of-order arrival is accepted once each). None needs a retry
    /// but for a store timeout.
    @Test(arguments: ["/v1/items", "/v1/parallel"])
    func hundredParallelRequestsAllSucceed(prefix: String) async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator()
            let client = environment.client(service: service)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<100 {
                    let request = self.get("\(prefix)/\(index)", on: environment)
                    group.addTask { try await client.data(for: request).1.statusCode }
                }
                var statuses: [Int] = []
                for try await status in group { statuses.append(status) }
                return statuses
            }
            #expect(statuses.count == 100)
            #expect(statuses.allSatisfy { $0 == 200 })
            // One enrollment served all of them.
            #expect(service.calls("generateKey") == 1)
            #expect(service.calls("attestKey") == 1)
            // On a starved machine a Redis reply can miss the 250 ms command timeout: the gateway
            // refuses 503 store_error (forwarding nothing) and the client retries with a fresh
            // assertion. Every assertion beyond the 100 is such a refusal; any other refusal
            // (a counter_replay above all) is a bug.
            let refused = environment.refusedRequests()
            #expect(
                refused.allSatisfy { $0.contains(#""status":503"#) && $0.contains(#""verdict":"store_error""#) },
                "the gateway refused: \(refused.prefix(5))")
            #expect(service.calls("generateAssertion") == 100 + refused.count)
            #expect(try await environment.upstreamRequests() == 100)
        }
    }

    @Test func appKilledBetweenGenerateKeyAndAttestResumesWithTheSameKey() async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator()
            let store = InMemoryKeyStore()
            // First launch: killed during attestKey (the call never completes).
            service.failNextAttestations([TestError("app killed")])
            let first = environment.client(service: service, keyStore: store)
            await #expect(throws: AttestedClientError.self) {
                try await first.data(for: self.get("/v1/items", on: environment))
            }
            let pending = try #require(try store.load())
            #expect(pending.state == .pending)

            // Relaunch: a new client over the same Keychain resumes the pending key.
            let second = environment.client(service: service, keyStore: store)
            let (data, response) = try await second.data(for: self.get("/v1/items", on: environment))
            #expect(response.statusCode == 200)
            #expect(try Echo(data).value("X-App-Attest-Key-Id") == pending.keyID)
            #expect(try store.load() == StoredKey(keyID: pending.keyID, state: .attested))
            #expect(service.calls("generateKey") == 1)
        }
    }

    @Test func killedAfterTheGatewayRegisteredTheKeyResumesThrough409() async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator()
            let store = InMemoryKeyStore()
            let first = environment.client(service: service, keyStore: store)
            _ = try await first.data(for: self.get("/v1/items", on: environment))
            let keyID = try #require(try store.load()).keyID
            // As if the app died after the gateway's 201 and before saving "attested".
            try store.save(StoredKey(keyID: keyID, state: .pending))
            let second = environment.client(service: service, keyStore: store)
            let (data, _) = try await second.data(for: self.get("/v1/items", on: environment))
            #expect(try Echo(data).value("X-App-Attest-Key-Id") == keyID)
            #expect(try store.load()?.state == .attested)
            #expect(service.calls("generateKey") == 1)
        }
    }

    @Test func redisDownThenBackTheClientBacksOffWithoutAnAttestationStorm() async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator()
            let clock = RecordingClock()
            let client = environment.client(service: service, clock: clock)
            environment.stopRedis()
            let restart = Task {
                try await Task.sleep(for: .seconds(2))
                try await environment.startRedis()
            }
            let (data, response) = try await client.data(for: self.get("/v1/items", on: environment))
            try await restart.value
            #expect(response.statusCode == 200)
            #expect(try Echo(data).value("X-App-Attest-Status") == "verified")
            // It waited (backoff), and Apple was asked once: challenges failed with 503 before any attestKey.
            #expect(!clock.sleeps.isEmpty)
            #expect(clock.sleeps.allSatisfy { $0 <= .seconds(2) })
            #expect(service.calls("attestKey") == 1)
        }
    }

    @Test func storeErrorOnAProtectedRequestIsRetriedWithBackoff() async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator()
            let clock = RecordingClock()
            let client = environment.client(service: service, clock: clock) { configuration in
                configuration.requestRetry = RetryPolicy(
                    maximumAttempts: 2,
                    initialDelay: .milliseconds(100),
                    maximumDelay: .milliseconds(200)
                )
            }
            _ = try await client.data(for: self.get("/v1/items", on: environment))
            environment.stopRedis()
            // Redis stays down: the client retries once, then reports the gateway's code.
            await #expect(throws: AttestedClientError(.storeError, "")) {
                try await client.data(for: self.get("/v1/items/2", on: environment))
            }
            #expect(clock.sleeps.count == 1)
            // A challenge route: the challenge endpoint answers 503; same budget, same code.
            await #expect(throws: AttestedClientError(.storeError, "")) {
                try await client.data(for: self.get("/v1/premium/report", on: environment))
            }
            #expect(clock.sleeps.count == 2)
            #expect(try await environment.upstreamRequests() == 1)
        }
    }

    /// Another assertion of the same key reached the gateway first, with a higher counter (as a
    /// second process sharing the key would do): `counter_replay`, then exactly one retry.
    @Test func counterReplayGetsExactlyOneRetryWithAFreshAssertion() async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator()
            let store = InMemoryKeyStore()
            let client = environment.client(service: service, keyStore: store)
            _ = try await client.data(for: self.get("/v1/items", on: environment))  // counter 1
            let keyID = try #require(try store.load()).keyID

            // Counter 2 accepted behind the client's back: its next assertion (2) is a replay, the retry (3) passes.
            try await environment.sendForeignAssertion(keyID: keyID, counter: 2, target: "/v1/other")
            let before = service.calls("generateAssertion")
            let (data, response) = try await client.data(for: self.get("/v1/items", on: environment))
            #expect(response.statusCode == 200)
            #expect(try Echo(data).value("X-App-Attest-Counter") == "3")
            #expect(service.calls("generateAssertion") == before + 2)

            // Far ahead (counter 50): the one retry (5) is still a replay, and the error reaches the app.
            try await environment.sendForeignAssertion(keyID: keyID, counter: 50, target: "/v1/other")
            await #expect(throws: AttestedClientError(.counterReplay, "")) {
                try await client.data(for: self.get("/v1/items", on: environment))
            }
            #expect(service.calls("generateAssertion") == before + 4)
        }
    }

    /// The operator protects more (SIGHUP) while the client holds a cached policy document
    /// (max-age 300 s): the gateway's 401 / 428 make it refresh the document and retry once.
    @Test func aStalePolicyDocumentIsRefreshedWhenTheGatewayAsksForMore() async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator()
            let client = environment.client(service: service)
            _ = try await client.data(for: self.get("/v1/items", on: environment))
            let (open, _) = try await client.data(for: self.get("/public/news", on: environment))
            #expect(try Echo(open).value("X-App-Attest-Status") == "skipped")

            let stricter = """
                  - name: api
                    match: { path_prefix: /v1/ }
                    upstream: api
                    mode: enforce
                    challenge: required
                  - name: public
                    match: { path_prefix: /public }
                    upstream: api
                    mode: enforce
                """
            try await environment.reload(routes: stricter)
            // Cached: /public is off. The gateway answers assertion_missing; refreshed: signed.
            let (news, _) = try await client.data(for: self.get("/public/news", on: environment))
            #expect(try Echo(news).value("X-App-Attest-Status") == "verified")
            // Now cached fresh, /v1/ needs a challenge: sent with one at once (one assertion).
            let before = service.calls("generateAssertion")
            let (items, _) = try await client.data(for: self.get("/v1/items", on: environment))
            #expect(try Echo(items).value("X-App-Attest-Status") == "verified")
            #expect(service.calls("generateAssertion") == before + 1)
            let document = try #require(await client.refreshPolicy())
            #expect(document.route(method: "GET", target: "/v1/items")?.challenge == .required)
        }
    }

    /// The document is unavailable (an old gateway, a broken path): the client signs every
    /// request, and a 428 challenge_missing makes it retry once with a challenge.
    @Test func withoutAPolicyDocumentEveryRequestIsSignedAndA428AddsAChallenge() async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator()
            let client = environment.client(service: service) { configuration in
                configuration.policyPath = "/no/such/document"
            }
            #expect(await client.refreshPolicy() == nil)
            let (premium, response) = try await client.data(for: self.get("/v1/premium/report", on: environment))
            #expect(response.statusCode == 200)
            #expect(try Echo(premium).value("X-App-Attest-Status") == "verified")
            // Signed without a challenge (refused 428), then with one: two assertions.
            #expect(service.calls("generateAssertion") == 2)
        }
    }

    @Test func revokedKeyFailsFastUntilReset() async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator()
            let store = InMemoryKeyStore()
            let client = environment.client(service: service, keyStore: store)
            _ = try await client.data(for: self.get("/v1/items", on: environment))
            let keyID = try #require(try store.load()).keyID
            try await environment.revoke(keyID)

            await #expect(throws: AttestedClientError(.revokedKey, "")) {
                try await client.data(for: self.get("/v1/items", on: environment))
            }
            #expect(try store.load()?.state == .revoked)
            // No new key behind the operator's back; the next request does not even go out.
            let assertions = service.calls("generateAssertion")
            await #expect(throws: AttestedClientError(.revokedKey, "")) {
                try await client.data(for: self.get("/v1/items", on: environment))
            }
            #expect(service.calls("generateAssertion") == assertions)
            #expect(service.calls("generateKey") == 1)

            // The app's support flow resets: a new key is enrolled.
            try await client.resetKey()
            let (data, _) = try await client.data(for: self.get("/v1/items", on: environment))
            #expect(try Echo(data).value("X-App-Attest-Key-Id") != keyID)
            #expect(service.calls("generateKey") == 2)
        }
    }

    @Test func unknownKeyEnrollsANewKeyOnce() async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator()
            let store = InMemoryKeyStore()
            let client = environment.client(service: service, keyStore: store)
            _ = try await client.data(for: self.get("/v1/items", on: environment))
            let keyID = try #require(try store.load()).keyID
            // The store lost the key (flushed): unknown_key → one new key, same request succeeds.
            let flushed = try await run(
                try Paths.executable("redis-cli"), ["-p", String(environment.redisPort), "flushall"])
            #expect(flushed.status == 0)
            let (data, response) = try await client.data(for: self.get("/v1/items", on: environment))
            #expect(response.statusCode == 200)
            #expect(try Echo(data).value("X-App-Attest-Key-Id") != keyID)
            #expect(service.calls("generateKey") == 2)
        }
    }

    @Test func invalidKeyFromTheDeviceEnrollsANewKey() async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator()
            let store = InMemoryKeyStore()
            let client = environment.client(service: service, keyStore: store)
            _ = try await client.data(for: self.get("/v1/items", on: environment))
            let keyID = try #require(try store.load()).keyID
            service.invalidate(keyID)  // e.g. the app data was restored onto a new device
            let (data, _) = try await client.data(for: self.get("/v1/items", on: environment))
            #expect(try Echo(data).value("X-App-Attest-Key-Id") != keyID)
            #expect(service.calls("attestKey") == 2)
        }
    }

    @Test func challengeRoutesAndBothBindings() async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator()
            let client = environment.client(service: service)

            // binding: request + challenge: required, with a query and a body.
            var premium = URLRequest(url: environment.url("/v1/premium/orders?coupon=SPRING"))
            premium.httpMethod = "POST"
            premium.setValue("application/json", forHTTPHeaderField: "Content-Type")
            premium.httpBody = Data(#"{"item":"sku-42","quantity":1}"#.utf8)
            let (data, response) = try await client.data(for: premium)
            #expect(response.statusCode == 200)
            let echo = try Echo(data)
            #expect(echo.value("X-App-Attest-Status") == "verified")
            #expect(echo.target == "/v1/premium/orders?coupon=SPRING")

            // binding: body + challenge in the JSON field the route names ("nonce").
            var legacy = URLRequest(url: environment.url("/v1/legacy/redeem"))
            legacy.httpMethod = "POST"
            legacy.httpBody = Data(#"{"code":"ABC"}"#.utf8)
            let (legacyData, legacyResponse) = try await client.data(for: legacy)
            #expect(legacyResponse.statusCode == 200)
            #expect(try Echo(legacyData).value("X-App-Attest-Status") == "verified")

            // A body that cannot carry the challenge is refused before anything is spent.
            let assertions = service.calls("generateAssertion")
            var notJSON = legacy
            notJSON.httpBody = Data("plain text".utf8)
            await #expect(throws: AttestedClientError(.bodyNotJSONObject, "")) {
                try await client.data(for: notJSON)
            }
            #expect(service.calls("generateAssertion") == assertions)
        }
    }

    /// The challenge expires while the device is slow to sign: `challenge_invalid`, then exactly
    /// one retry with a new challenge and a new assertion.
    @Test func expiredChallengeGetsExactlyOneRetryWithANewChallenge() async throws {
        try await self.withEnvironment(challengeTTLSeconds: 1) { environment in
            let service = environment.simulator()
            let client = environment.client(service: service)
            _ = try await client.data(for: self.get("/v1/items", on: environment))  // enrolled
            let before = service.calls("generateAssertion")

            service.delayNextAssertions([.milliseconds(2500)])
            let (data, response) = try await client.data(for: self.get("/v1/premium/report", on: environment))
            #expect(response.statusCode == 200)
            #expect(try Echo(data).value("X-App-Attest-Status") == "verified")
            #expect(service.calls("generateAssertion") == before + 2)

            // Slow twice in a row: the single retry fails too, and the app gets the gateway's code.
            service.delayNextAssertions([.milliseconds(2500), .milliseconds(2500)])
            await #expect(throws: AttestedClientError(.challengeInvalid, "")) {
                try await client.data(for: self.get("/v1/premium/report", on: environment))
            }
            #expect(service.calls("generateAssertion") == before + 4)
        }
    }

    @Test func streamedBodiesAreRefused() async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator()
            let client = environment.client(service: service)
            var request = URLRequest(url: environment.url("/v1/upload"))
            request.httpMethod = "POST"
            request.httpBodyStream = InputStream(data: Data("abc".utf8))
            await #expect(throws: AttestedClientError(.streamedBody, "")) {
                try await client.data(for: request)
            }
            #expect(service.calls("generateKey") == 0)
        }
    }

    @Test func gatewayRestartKeepsTheKey() async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator()
            let client = environment.client(service: service)
            _ = try await client.data(for: self.get("/v1/items", on: environment))
            environment.stopGateway()
            try await environment.startGateway()
            var status = 0
            // The first GET after the restart may hit a pooled connection the old process closed.
            for _ in 0..<3 where status != 200 {
                status = (try? await client.data(for: self.get("/v1/items", on: environment)))?.1.statusCode ?? 0
            }
            #expect(status == 200)
            #expect(service.calls("attestKey") == 1)
            #expect(service.calls("generateKey") == 1)
        }
    }

    @Test func unsupportedDeviceGetsATypedErrorWhereNoFallbackIsOffered() async throws {
        try await self.withEnvironment { environment in
            let service = environment.simulator(isSupported: false)
            let client = environment.client(service: service)
            // The gateway offers no DeviceCheck fallback and no debug tokens yet (issues 12, 13).
            await #expect(throws: AttestedClientError(.appAttestUnsupported, "")) {
                try await client.data(for: self.get("/v1/items", on: environment))
            }
            // Monitor routes forward anyway, off routes need nothing.
            let (watch, _) = try await client.data(for: self.get("/watch/feed", on: environment))
            #expect(try Echo(watch).value("X-App-Attest-Status") == "failed; reason=assertion_missing")
            let (_, open) = try await client.data(for: self.get("/public/x", on: environment))
            #expect(open.statusCode == 200)
            #expect(service.calls("generateKey") == 0)
        }
    }

    @Test func policyDocumentIsVersionedCacheableAndMatchesThePolicy() async throws {
        try await self.withEnvironment { environment in
            let url = "http://127.0.0.1:\(environment.proxyPort)/app-attest/policy"
            let (data, response) = try await GatewayEnvironment.get(url)
            #expect(response.statusCode == 200)
            #expect(response.value(forHTTPHeaderField: "Cache-Control") == "public, max-age=300")
            let etag = try #require(response.value(forHTTPHeaderField: "ETag"))
            let (_, again) = try await GatewayEnvironment.get(url, headers: ["If-None-Match": etag])
            #expect(again.statusCode == 304)

            let document = try JSONDecoder().decode(GatewayPolicyDocument.self, from: data)
            #expect(document.version == 1)
            #expect(document.appIDs == [GatewayEnvironment.appID])
            #expect(document.endpoints.challenge == "/app-attest/challenge")
            #expect(document.routes.map(\.mode) == [.enforce, .enforce, .enforce, .enforce, .monitor, .off])
            // The route's own counter window, 0 elsewhere; no route accepts debug tokens.
            #expect(document.routes.map(\.counterWindow) == [0, 0, 32, 0, 0, 0])
            #expect(document.routes.allSatisfy { !$0.allowDebugTokens })
            let legacy = try #require(document.route(method: "POST", target: "/v1/legacy/x"))
            #expect(legacy.binding == .body && legacy.challengeField == "nonce" && legacy.challenge == .required)
            // Nothing secret: no upstream address, no store.
            let text = String(decoding: data, as: UTF8.self)
            #expect(!text.contains("127.0.0.1") && !text.contains("redis") && !text.contains("upstream"))
        }
    }
}
