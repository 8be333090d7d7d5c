import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Sends your app's requests through attest-gateway, adding what each route needs.
///
/// ```swift
/// let client = AttestedClient(gateway: URL(string: "https://api.example.com")!)
/// var request = URLRequest(url: URL(string: "https://api.example.com/v1/orders")!)
/// request.httpMethod = "POST"
/// request.httpBody = Data(#"{"item":"sku-42"}"#.utf8)
/// let (data, response) = try await client.data(for: request)
/// ```
///
/// What happens for each request:
/// 1. The route is looked up in the gateway's policy document (`GET /app-attest/policy`,
///    cached per its `Cache-Control`/`ETag`). `off` routes, and paths no route matches, are
///    sent unchanged.
/// 2. The first protected request enrolls the install: `generateKey`, the key ID **saved**
///    (state `pending`), a challenge, `attestKey` (Apple), `POST /app-attest/attest`, saved as
///    `attested`. Once per key, shared by every request that arrives meanwhile; `serverUnavailable`
///    and the gateway's 503/429 are retried with exponential backoff and jitter (`Retry-After`
///    honoured), with the same key. A relaunch after a kill resumes the `pending` key.
/// 3. A challenge is fetched when the route requires one; clientData is built exactly as
///    docs/protocol.md says for the route's binding; one assertion per request.
/// 4. Assertions of one key are generated in order and kept within the route's counter window
///    (`AssertionWindow`): strictly one at a time without a window, up to N with one.
/// 5. Gateway refusals are handled once each: `counter_replay` and `challenge_invalid` get one
///    retry with a fresh assertion (and challenge); `unknown_key` and `DCError.invalidKey` get one
///    new key; `store_error` / `body_budget_exhausted` (never forwarded) are retried with backoff;
///    `challenge_missing` / `assertion_missing` refresh the policy and retry once.
///    `revoked_key` is final (see `AttestedClientError.Code.revokedKey`).
///
/// Every other gateway refusal is thrown as an `AttestedClientError` with the gateway's code;
/// your API's own responses are returned, whatever their status.
public actor AttestedClient {
    public let gateway: URL
    public let appID: String?
    private let service: any AppAttestService
    private let clock: any AttestClock
    private let configuration: Configuration
    private let api: GatewayAPI
    private let policy: PolicyCache
    private let keys: KeyEnrollment
    private let deviceCheck: DeviceCheckFallback?

    private var windows: [String: AssertionWindow] = [:]
    private var windowWaiters: [CheckedContinuation<Void, Never>] = []

    /// - Parameters:
    ///   - gateway: the gateway's base URL (scheme, host, port); the endpoint paths come from
    ///     its policy document.
    ///   - appID: `TEAMID.bundle.id`; when given, the client refuses to enroll against a gateway
    ///     whose policy document lists other App IDs (a wasted attestation otherwise). Optional:
    ///     App Attest itself knows the app's identity.
    public init(
        gateway: URL,
        appID: String? = nil,
        service: any AppAttestService,
        keyStore: any KeyStore,
        deviceCheck: (any DeviceCheckTokenProvider)? = nil,
        transport: any HTTPTransport = URLSessionTransport(),
        clock: any AttestClock = SystemAttestClock(),
        configuration: Configuration = Configuration()
    ) {
        let api = GatewayAPI(gateway: gateway, transport: transport)
        let policy = PolicyCache(
            api: api,
            clock: clock,
            path: configuration.policyPath,
            retryInterval: configuration.policyRetryInterval,
            fallbackRoute: configuration.fallbackRoute
        )
        self.gateway = gateway
        self.appID = appID
        self.service = service
        self.clock = clock
        self.configuration = configuration
        self.api = api
        self.policy = policy
        self.keys = KeyEnrollment(
            storage: KeyStorage(store: keyStore),
            service: service,
            api: api,
            policy: policy,
            clock: clock,
            appID: appID,
            retry: configuration.enrollmentRetry,
            cooldown: configuration.enrollmentCooldown
        )
        self.deviceCheck = deviceCheck.map {
            DeviceCheckFallback(
                provider: $0,
                api: api,
                policy: policy,
                clock: clock,
                appID: appID,
                renewalMargin: configuration.deviceCheckRenewalMargin
            )
        }
    }

    // MARK: - Public API

    /// Sends `request` with the App Attest headers its route needs; returns your API's response.
    ///
    /// - Throws: `AttestedClientError`; its `code` is the gateway's when the gateway refused.
    ///   A request with an `httpBodyStream` is refused (`streamedBody`): set `httpBody`.
    public func data(for request: URLRequest) async throws(AttestedClientError) -> (Data, HTTPURLResponse) {
        do {
            return try await self.perform(request)
        } catch let error as AttestedClientError {
            throw error
        } catch is CancellationError {
            throw AttestedClientError(.transport, "cancelled", underlying: CancellationError())
        } catch {
            throw AttestedClientError(.transport, "\(error)", underlying: error)
        }
    }

    /// Forgets the key (any state, `revoked` included): the next protected request enrolls a
    /// new one. For the app's support flow after an operator cleared a revoked install, or a
    /// "sign out everywhere". Not needed after reinstall, restore or migration (handled).
    public func resetKey() throws(AttestedClientError) {
        try self.keys.reset()
    }

    /// The policy document, fetched now (ignoring the cache). nil when unavailable.
    public func refreshPolicy() async -> GatewayPolicyDocument? {
        await self.policy.document(force: true)
    }

    // MARK: - Request flow

    private struct Budget {
        var newKeyUsed = false
        var replayRetried = false
        var challengeRetried = false
        var policyRefreshed = false
        var storeRetries = 0
    }

    private func perform(_ original: URLRequest) async throws -> (Data, HTTPURLResponse) {
        guard original.httpBodyStream == nil else {
            throw AttestedClientError(
                .streamedBody,
                "httpBodyStream cannot be signed: the assertion covers the exact body bytes; set httpBody"
            )
        }
        guard let url = original.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let target = ClientData.requestTarget(of: url)
        else {
            throw AttestedClientError(.invalidRequest, "the request needs an absolute http(s) URL")
        }
        let method = original.httpMethod ?? "GET"
        var route = await self.policy.route(method: method, target: target)
        var budget = Budget()

        while true {
            guard let current = route, current.mode != .off else {
                // Not protected, per the document. If the gateway disagrees (the document was stale:
                // 401 assertion_missing, 428 challenge_missing), refresh it and sign, once.
                let result = try await self.api.send(Header.stripped(original))
                guard let refusal = AttestedClientError.gatewayError(result.0, result.1) else { return result }
                guard refusal.code == .assertionMissing || refusal.code == .challengeMissing, !budget.policyRefreshed
                else { throw refusal }
                budget.policyRefreshed = true
                route = await self.policy.route(method: method, target: target, after: refusal, was: route)
                continue
            }
            if let limit = current.maxBodyBytes, (original.httpBody?.count ?? 0) > limit {
                throw AttestedClientError(.bodyTooLarge, "the body exceeds the route's max_body_bytes (\(limit))")
            }
            #if DEBUG
                if current.allowDebugTokens, let token = self.configuration.debugToken {
                    var request = Header.stripped(original)
                    request.setValue(token, forHTTPHeaderField: Header.debugToken)
                    return try Self.unlessRefused(try await self.api.send(request))
                }
            #endif
            if !self.service.isSupported {
                if current.deviceCheckFallback, let deviceCheck = self.deviceCheck, deviceCheck.provider.isSupported {
                    return try await deviceCheck.send(original)
                }
                if current.mode == .monitor {
                    // Monitor routes forward unverified requests; the upstream sees the failure.
                    return try Self.unlessRefused(try await self.api.send(Header.stripped(original)))
                }
                throw AttestedClientError(.appAttestUnsupported, "App Attest is not supported on this device")
            }

            let attempt = try await self.attempt(
                original, method: method, target: target, route: current, budget: &budget)
            switch attempt {
            case .done(let data, let response):
                return (data, response)
            case .retry:
                continue
            case .refreshPolicy(let refusal):
                route = await self.policy.route(method: method, target: target, after: refusal, was: current)
            }
        }
    }

    private enum AttemptResult {
        case done(Data, HTTPURLResponse)
        case retry
        case refreshPolicy(AttestedClientError)
    }

    /// One signed try of `original` on `route`.
    private func attempt(
        _ original: URLRequest,
        method: String,
        target: String,
        route: GatewayPolicyDocument.Route,
        budget: inout Budget
    ) async throws -> AttemptResult {
        let keyID = try await self.keys.attestedKeyID()
        var request = Header.stripped(original)
        var body = original.httpBody ?? Data()
        var challenge: String?
        if route.challenge == .required {
            do {
                challenge = try await self.api.challenge(at: await self.policy.challengePath)
            } catch let error as AttestedClientError where error.status == 503 || error.status == 429 {
                // Challenges unavailable (store down) or rate-limited: nothing was sent yet.
                try await self.backOff(after: error, budget: &budget)
                return .retry
            }
        }
        let clientData: Data
        switch route.binding {
        case .request:
            clientData = ClientData.request(method: method, target: target, body: body, challenge: challenge)
            if let challenge { request.setValue(challenge, forHTTPHeaderField: Header.challenge) }
        case .body:
            if let challenge {
                body = try ClientData.inserting(challenge: challenge, field: route.challengeField, into: body)
                request.httpBody = body
            }
            clientData = ClientData.body(body)
        }

        // Generation in counter order, within the route's window.
        let span = max(1, route.counterWindow)
        let ticket = try await self.startAssertion(keyID: keyID, span: span)
        let assertion: Data
        do {
            assertion = try await self.service.generateAssertion(keyID, clientDataHash: ClientData.hash(clientData))
            self.assertionGenerated(keyID: keyID, ticket: ticket)
        } catch let error as AppAttestServiceError {
            self.assertionGenerated(keyID: keyID, ticket: ticket)
            self.finishAssertion(keyID: keyID, ticket: ticket)
            if error.kind == .invalidKey && !budget.newKeyUsed {
                budget.newKeyUsed = true
                try await self.keys.discard(keyID)
                return .retry
            }
            throw AttestedClientError(.appAttestFailed, "generateAssertion failed: \(error)", underlying: error)
        } catch {
            self.assertionGenerated(keyID: keyID, ticket: ticket)
            self.finishAssertion(keyID: keyID, ticket: ticket)
            throw AttestedClientError(.appAttestFailed, "generateAssertion failed: \(error)", underlying: error)
        }
        request.setValue(keyID, forHTTPHeaderField: Header.keyID)
        request.setValue(assertion.base64EncodedString(), forHTTPHeaderField: Header.assertion)

        let result: (Data, HTTPURLResponse)
        do {
            result = try await self.api.send(request)
        } catch {
            self.finishAssertion(keyID: keyID, ticket: ticket)
            throw error
        }
        self.finishAssertion(keyID: keyID, ticket: ticket)

        guard let refusal = AttestedClientError.gatewayError(result.0, result.1) else {
            return .done(result.0, result.1)
        }
        switch refusal.code {
        case .counterReplay where !budget.replayRetried:
            budget.replayRetried = true
            return .retry
        case .challengeInvalid where !budget.challengeRetried:
            budget.challengeRetried = true
            return .retry
        case .unknownKey where !budget.newKeyUsed:
            budget.newKeyUsed = true
            try await self.keys.discard(keyID)
            return .retry
        case .revokedKey:
            try await self.keys.revoke(keyID)
            throw refusal
        case .challengeMissing, .assertionMissing:
            guard !budget.policyRefreshed else { throw refusal }
            budget.policyRefreshed = true
            return .refreshPolicy(refusal)
        case .storeError, .bodyBudgetExhausted, .rateLimited:
            try await self.backOff(after: refusal, budget: &budget)
            return .retry
        default:
            throw refusal
        }
    }

    /// Waits before retrying a request the gateway refused without forwarding it (`requestRetry`:
    /// exponential, jittered, at least `Retry-After`); throws `error` once the budget is spent.
    private func backOff(after error: AttestedClientError, budget: inout Budget) async throws {
        guard budget.storeRetries + 1 < self.configuration.requestRetry.maximumAttempts else { throw error }
        let delay = self.configuration.requestRetry.delay(
            beforeRetry: budget.storeRetries,
            retryAfter: error.retryAfter,
            jitter: Double.random(in: 0...1)
        )
        budget.storeRetries += 1
        try await self.clock.sleep(for: delay)
    }

    /// Throws the gateway's refusal in `result`, if any.
    private static func unlessRefused(_ result: (Data, HTTPURLResponse)) throws -> (Data, HTTPURLResponse) {
        if let refusal = AttestedClientError.gatewayError(result.0, result.1) { throw refusal }
        return result
    }

    // MARK: - Assertion window

    /// Waits until the window of `keyID` lets a new assertion start; a task cancelled while
    /// waiting gives up its turn (`CancellationError`) instead of spending a counter.
    private func startAssertion(keyID: String, span: Int) async throws -> AssertionWindow.Ticket {
        while !self.windows[keyID, default: AssertionWindow()].canStart(span: span) {
            await withCheckedContinuation { self.windowWaiters.append($0) }
        }
        try Task.checkCancellation()
        return self.windows[keyID, default: AssertionWindow()].start()
    }

    private func assertionGenerated(keyID: String, ticket: AssertionWindow.Ticket) {
        self.windows[keyID]?.generated(ticket)
        self.wakeWindowWaiters()
    }

    private func finishAssertion(keyID: String, ticket: AssertionWindow.Ticket) {
        self.windows[keyID]?.finish(ticket)
        self.wakeWindowWaiters()
    }

    private func wakeWindowWaiters() {
        let waiters = self.windowWaiters
        self.windowWaiters = []
        for waiter in waiters { waiter.resume() }
    }
}
