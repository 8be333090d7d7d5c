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
    let configuration: Configuration
    let service: any AppAttestService
    let clock: any AttestClock
    let api: GatewayAPI
    let policy: PolicyCache
    let keys: KeyEnrollment
    let signer: RequestSigner
    private let deviceCheck: DeviceCheckFallback?

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
        self.configuration = configuration
        self.service = service
        self.clock = clock
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
        self.signer = RequestSigner(service: service, sequencer: AssertionSequencer())
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
        try await self.throwingClientErrors { try await self.perform(request) }
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

    /// Runs `operation` with what it throws as the client's one error type: an
    /// `AttestedClientError` as it is, cancellation and anything else as `transport`.
    func throwingClientErrors<Value>(_ operation: () async throws -> Value) async throws(AttestedClientError) -> Value {
        do {
            return try await operation()
        } catch let error as AttestedClientError {
            throw error
        } catch is CancellationError {
            throw AttestedClientError(.transport, "cancelled", underlying: CancellationError())
        } catch {
            throw AttestedClientError(.transport, "\(error)", underlying: error)
        }
    }

    // MARK: - Request flow

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
        var rules = RequestRetryRules(backoff: self.configuration.requestRetry)

        while true {
            guard let current = route, current.mode != .off else {
                // Not protected, per the document. The gateway may disagree (the document was
                // stale): the rules then refresh it and sign, once.
                let result = try await self.api.send(Header.stripped(original))
                guard let refusal = AttestedClientError.gatewayError(result.0, result.1) else { return result }
                guard rules.afterUnsignedRefusal(refusal) == .refreshPolicy else { throw refusal }
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

            switch try await self.attempt(original, method: method, target: target, route: current, rules: &rules) {
            case .done(let data, let response):
                return (data, response)
            case .retry:
                continue
            case .refreshPolicy(let refusal):
                route = await self.policy.route(method: method, target: target, after: refusal, was: current)
            }
        }
    }

    enum ChallengeStep {
        /// The route's fresh challenge, nil when it asks none.
        case ready(String?)
        /// The challenge endpoint answered 503 or 429 and the back-off was waited out: try again.
        case retry
    }

    /// The challenge `route` asks for, fetched now. A 503 (challenges unavailable: store down)
    /// or 429 is waited out as `rules` allow (nothing was sent yet) and thrown once they allow
    /// no more.
    func challenge(for route: GatewayPolicyDocument.Route, rules: inout RequestRetryRules) async throws
        -> ChallengeStep
    {
        guard route.challenge == .required else { return .ready(nil) }
        do {
            return .ready(try await self.api.challenge(at: await self.policy.challengePath))
        } catch let error as AttestedClientError where error.status == 503 || error.status == 429 {
            guard let delay = rules.backOff(after: error, jitter: Double.random(in: 0...1)) else { throw error }
            try await self.clock.sleep(for: delay)
            return .retry
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
        rules: inout RequestRetryRules
    ) async throws -> AttemptResult {
        let keyID = try await self.keys.attestedKeyID()
        guard case .ready(let challenge) = try await self.challenge(for: route, rules: &rules) else { return .retry }
        let (request, clientData) = try RequestSigner.prepare(
            original, method: method, target: target, route: route, challenge: challenge)
        let result: (Data, HTTPURLResponse)
        do {
            result = try await self.signer.send(
                request, clientData: clientData, keyID: keyID, route: route, via: self.api)
        } catch let error as AttestedClientError
            where (error.underlying as? AppAttestServiceError)?.kind == .invalidKey
        {
            guard rules.newKeyAfterInvalidKey() else { throw error }
            try await self.keys.discard(keyID)
            return .retry
        }

        guard let refusal = AttestedClientError.gatewayError(result.0, result.1) else {
            return .done(result.0, result.1)
        }
        switch rules.afterSignedRefusal(refusal, jitter: Double.random(in: 0...1)) {
        case .retry:
            return .retry
        case .newKey:
            try await self.keys.discard(keyID)
            return .retry
        case .revoke:
            try await self.keys.revoke(keyID)
            throw refusal
        case .refreshPolicy:
            return .refreshPolicy(refusal)
        case .backOff(let delay):
            try await self.clock.sleep(for: delay)
            return .retry
        case .fail:
            throw refusal
        }
    }

    /// Throws the gateway's refusal in `result`, if any.
    private static func unlessRefused(_ result: (Data, HTTPURLResponse)) throws -> (Data, HTTPURLResponse) {
        if let refusal = AttestedClientError.gatewayError(result.0, result.1) { throw refusal }
        return result
    }
}
