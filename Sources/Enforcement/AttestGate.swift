package import AppleClient
import Dispatch
package import Foundation
package import GateContract
package import GatewayIO
package import GoogleClient
package import HTTP1
package import KeyStore
package import PolicyModel
package import Verification

/// App Attest enforcement at the gateway: the `RequestGate` of the main listeners. It
/// classifies each request and dispatches it to the feature that answers it:
///
/// - the challenge and attest endpoints (`endpoints:` in the policy, POST only) are answered
///   locally by `ChallengeEndpoint` and `AttestEndpoint`; the policy document by
///   `PolicyDocumentEndpoint`;
/// - a request on an `enforce` or `monitor` route is verified by `ProtectedRequestVerifier`;
/// - `off` routes are forwarded with `X-App-Attest-Status: skipped`.
///
/// Every client-sent `X-App-Attest-*` / `X-App-Assertion` header is removed before anything
/// is forwarded; the gateway adds its own.
///
/// The route is matched once, in `classify`; its index travels in the classification to
/// `decide`. Immutable after init (a policy reload builds a new gate), so it is shared by every
/// loop. `decide` runs on a connection's loop; its store calls go out on that loop's Redis
/// connection, and work too slow for a loop (an attestation's certificate chain, a key not yet
/// cached) runs on the verification queue and comes back to the loop for the store.
package final class AttestGate: RequestGate {
    /// Route names used in metrics and logs for requests that match no policy route.
    package enum RouteLabel {
        package static let challenge = GateEndpoint.challenge.routeLabel
        package static let report = GateEndpoint.report.routeLabel
        package static let attest = GateEndpoint.attest.routeLabel
        package static let policy = GateEndpoint.policy.routeLabel
        package static let deviceCheck = GateEndpoint.deviceCheck.routeLabel
        package static let none = "-"
    }

    /// How many keys the in-process public-key cache holds (LRU beyond).
    package static let defaultKeyCacheCapacity = 16_384

    package let policy: GatewayPolicy
    private let routes: RouteTable
    /// Per route index, the classification of a passthrough (`mode: off`) route, built once:
    /// every request on such a route gets a copy (one retain), not a fresh box of strings.
    private let passthroughClassifications: [GateClassification?]
    private let metrics: any GateMetrics
    /// Per-address token buckets for the anonymous endpoints (process-wide).
    private let endpointLimiter: AddressRateLimiter
    /// Refusals by a limit are logged at most once a second (metrics count every one).
    private let limitLog = LogThrottle()
    /// `GET <endpoints.policy>`: built once per policy (a reload builds a new gate).
    private let policyDocument: PolicyDocumentEndpoint
    private let challengeEndpoint: ChallengeEndpoint
    private let reportEndpoint: ClientReportEndpoint
    private let attestEndpoint: AttestEndpoint
    private let deviceCheckEndpoint: DeviceCheckExchangeEndpoint
    private let protectedRequests: ProtectedRequestVerifier
    /// Attestation tokens (`tokens:`): the exchange, the published keys, and routes with
    /// `accept_token:`; nil parts answer 404 where the policy has no `tokens:`.
    private let tokenEndpoint: TokenEndpoint
    private let tokenKeySet: TokenKeySetEndpoint
    private let tokenRoutes: TokenRouteCheck?
    /// Signs every forwarded head (`identity_signature:`); nil = no signature header.
    private let identitySigner: IdentitySigner?
    /// The signature's timestamp (and the verification time of attestations).
    private let now: @Sendable () -> Date
    /// The endpoint limiter's clock (monotonic nanoseconds).
    private let monotonicNanoseconds: @Sendable () -> UInt64

    /// Attestation verification (a certificate chain check, ~1 ms) and work after a store
    /// completion run here, never on the store's queue or a connection queue.
    private static let verificationQueue = DispatchQueue(
        label: "attest-gateway.verification",
        qos: .userInitiated,
        attributes: .concurrent
    )

    /// - Parameters:
    ///   - trustRootsPEM: contents of the policy's `trust_roots` files (development only).
    ///   - challengeKeys: challenge signing keys, shared by the fleet (process-wide: kept
    ///     across reloads); nil reads them from `store` now.
    ///   - identitySigner: signs forwarded heads (`identity_signature:`); nil = unsigned.
    ///   - deviceCheck: DeviceCheck over the Apple client (`apple:`): the fallback exchange
    ///     and its tokens; nil = the exchange answers 503.
    ///   - tokens: the policy's `tokens:` keys, loaded (`AttestationTokens.load`); nil = none.
    ///   - androidRevocation: the revocation status list `serve` keeps current for
    ///     `android.revocation`; nil = a holder of no list (enrollments refused as stale).
    ///   - playIntegrityDecoders: standard Play Integrity tokens through Google (kept across
    ///     reloads by the factory); nil = standard tokens cannot be decoded.
    ///   - now: the verification time of attestations and the signature's `t` (tests pin it).
    ///   - monotonicNanoseconds: the endpoint limiter's clock (tests pin it).
    package init(
        policy: GatewayPolicy,
        store: any AttestStore,
        trustRootsPEM: [String] = [],
        metrics: any GateMetrics = NoGateMetrics(),
        keyCacheCapacity: Int = AttestGate.defaultKeyCacheCapacity,
        challengeKeys: ChallengeKeyring? = nil,
        endpointLimiter: AddressRateLimiter? = nil,
        identitySigner: IdentitySigner? = nil,
        deviceCheck: DeviceCheckClient? = nil,
        tokens: AttestationTokens? = nil,
        androidRevocation: AndroidRevocationCurrent? = nil,
        playIntegrityDecoders: PlayIntegrityStandardDecoders? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        monotonicNanoseconds: @escaping @Sendable () -> UInt64 = { SystemCalls.monotonicNanoseconds() }
    ) throws(VerificationError) {
        self.policy = policy
        self.monotonicNanoseconds = monotonicNanoseconds
        self.identitySigner = identitySigner
        self.now = now
        let keyring: ChallengeKeyring
        if let challengeKeys {
            keyring = challengeKeys
        } else {
            // Tools and tests: the factory shares one keyring across reloads instead.
            keyring = ChallengeKeyring(store: store)
            keyring.waitUntilLoaded(timeout: .seconds(2))
        }
        self.endpointLimiter =
            endpointLimiter
            ?? AddressRateLimiter(
                ratePerSecond: policy.limits.challengeRatePerSecond, burst: policy.limits.challengeBurst)
        self.routes = RouteTable(routes: policy.routes)
        self.passthroughClassifications = policy.routes.indices.map { index in
            let route = policy.routes[index]
            guard route.mode == .off else { return nil }
            return GateClassification(
                routeName: route.name, upstream: route.upstream, bufferBodyUpTo: nil, routeIndex: index,
                judgement: RouteJudgement(mode: .passthrough))
        }
        self.metrics = metrics
        self.policyDocument = PolicyDocumentEndpoint(policy: policy)
        self.reportEndpoint = ClientReportEndpoint(path: policy.endpoints.report, metrics: metrics)
        let challenges = IssuedChallenges(
            keyring: keyring, ttlSeconds: policy.challengeTTLSeconds, store: store, now: now)
        let storeFailures = StoreFailureReporter(metrics: metrics)
        let fraudRisk = FraudRiskGateHooks(
            receipts: try ReceiptVerifier(additionalTrustRootsPEM: trustRootsPEM),
            store: store.fraudRiskState,
            refreshEnabled: policy.apple?.fraudRisk.isEnabled ?? false)
        self.challengeEndpoint = ChallengeEndpoint(
            path: policy.endpoints.challenge, ttlSeconds: policy.challengeTTLSeconds, challenges: challenges,
            metrics: metrics)
        self.attestEndpoint = AttestEndpoint(
            path: policy.endpoints.attest,
            // No App ID (a passthrough-only policy: the loader requires App IDs as soon as a
            // route enforces or monitors): the attest endpoint refuses.
            verifier: policy.appIDs.isEmpty
                ? nil
                : try AttestationVerifier(
                    appIDs: policy.appIDs,
                    environment: Self.requirement(policy.environment),
                    additionalTrustRootsPEM: trustRootsPEM
                ),
            challenges: challenges,
            store: store,
            fraudRisk: fraudRisk,
            metrics: metrics,
            storeFailures: storeFailures,
            verificationQueue: Self.verificationQueue,
            now: now,
            attestationRateAlert: policy.attestationRateAlert,
            android: try policy.android.map { android throws(VerificationError) in
                do throws(AndroidAttestationError) {
                    return try AndroidEnrollmentVerifier(
                        policy: android, revocation: androidRevocation, decoders: playIntegrityDecoders)
                } catch {
                    throw VerificationError(.malformedCertificate, "android.trust_anchors: \(error.reason)")
                }
            }
        )
        let deviceCheckSettings = deviceCheck?.configuration.deviceCheck ?? AppleDeviceCheckSettings()
        let tokenTTL = Int(deviceCheckSettings.tokenTTL.components.seconds)
        self.deviceCheckEndpoint = DeviceCheckExchangeEndpoint(
            path: policy.endpoints.deviceCheck,
            appIDs: policy.appIDs,
            apple: deviceCheck.map {
                DeviceCheckExchangeEndpoint.Apple(
                    client: $0, blockedBit: deviceCheckSettings.blockedBit, ttlSeconds: tokenTTL)
            },
            keyring: keyring,
            metrics: metrics,
            now: now,
            tokens: tokens
        )
        self.protectedRequests = ProtectedRequestVerifier(
            environment: policy.environment,
            appIDs: policy.appIDs,
            keyCacheCapacity: keyCacheCapacity,
            challenges: challenges,
            store: store,
            fraudRisk: fraudRisk,
            metrics: metrics,
            storeFailures: storeFailures,
            verificationQueue: Self.verificationQueue,
            now: now,
            deviceCheckTokens: deviceCheck.map {
                DeviceCheckTokenCheck(
                    keyring: keyring, ttlSeconds: tokenTTL, appIDs: policy.appIDs,
                    environment: $0.configuration.environment)
            },
            androidPackages: policy.android?.apps.map(\.packageName) ?? [],
            androidReverifyAfter: Dictionary(
                policy.android?.apps.compactMap { app in app.playIntegrity?.reverifyAfter.map { (app.packageName, $0) }
                }
                    ?? [], uniquingKeysWith: { first, _ in first })
        )
        self.tokenEndpoint = TokenEndpoint(
            path: policy.endpoints.token, tokens: tokens, appIDs: policy.appIDs, environment: policy.environment,
            verifier: self.protectedRequests, metrics: metrics, now: now)
        self.tokenKeySet = TokenKeySetEndpoint(tokens: tokens)
        self.tokenRoutes = tokens.map {
            TokenRouteCheck(
                tokens: $0, appIDs: policy.appIDs, environment: policy.environment, store: store, metrics: metrics,
                storeFailures: storeFailures,
                now: now)
        }
    }

    private static func requirement(_ environment: EnvironmentPolicy) -> EnvironmentRequirement {
        switch environment {
        case .production: return .production
        case .development: return .development
        case .any: return .any
        }
    }

    /// The route `classify` matched (its `routeIndex`): the check-only listener asks whether
    /// the route's assertion covers a body it will not see.
    package func route(at index: Int) -> RoutePolicy { self.routes.routes[index] }

    /// Counts a refusal decided around this gate (the check-only listener's own), in the same
    /// `attest_gateway_verdicts_total` as the gate's.
    package func countRefusal(route: String, verdict: AttestVerdict) {
        self.metrics.requestDecided(route: route, verdict: verdict)
    }

    // MARK: - RequestGate

    /// `path == endpoint` when `path` has `length` UTF-8 bytes, comparing lengths first: most
    /// requests are on routes, and a generic Substring/String comparison costs ~100 instructions.
    @inline(__always)
    private static func isEndpoint(_ path: Substring, length: Int, _ endpoint: String) -> Bool {
        length == endpoint.utf8.count && path == endpoint
    }

    package func classify(_ head: HTTPRequestHead, client: String) -> GateClassification {
        // Every door's request passes the same rules first (the check-only listener's too).
        if let violation = RequestRules.violation(of: head) {
            return self.refuse(violation, route: RouteLabel.none, limit: nil)
        }
        let path = head.path
        if let endpoint = self.endpoint(at: path) {
            let label = endpoint.routeLabel
            guard endpoint != .policy, endpoint != .tokenKeys, endpoint != .tokenDiscovery else {
                return GateClassification(routeName: label, upstream: nil, bufferBodyUpTo: nil, endpoint: endpoint)
            }
            guard head.method == "POST" else {
                return GateClassification(routeName: label, upstream: nil, bufferBodyUpTo: nil, endpoint: endpoint)
            }
            // The token exchange is verified as a protected request is (no anonymous work).
            if endpoint == .token {
                return GateClassification(
                    routeName: label, upstream: nil, bufferBodyUpTo: EndpointRequests.maxEndpointBodyBytes,
                    endpoint: endpoint)
            }
            // Anonymous work: bounded per address before any of it is done.
            let admission = self.endpointLimiter.admit(client, nowNanoseconds: self.monotonicNanoseconds())
            if case .limited(let seconds) = admission {
                return self.refuse(
                    EnforcementError(
                        .rateLimited,
                        "too many \(label.dropFirst()) requests from this address (limits.challenge_rate_per_second)",
                        retryAfterSeconds: seconds),
                    route: label, limit: "challenge_rate")
            }
            // The challenge endpoint reads no body; the attest, DeviceCheck and report endpoints'
            // is their JSON request (a report's at most 1 KiB: the proxy answers 413 beyond).
            let buffer =
                endpoint == .challenge
                ? nil : endpoint == .report ? ClientFailureReport.maxBodyBytes : EndpointRequests.maxEndpointBodyBytes
            return GateClassification(routeName: label, upstream: nil, bufferBodyUpTo: buffer, endpoint: endpoint)
        }
        var lineRoute: Int?
        switch self.routes.lookup(method: head.method, target: head.target[...]) {
        case .noRoute:
            lineRoute = nil
        case .ambiguous(let why):
            return self.refuse(
                EnforcementError(.ambiguousTarget, "the request target has \(why); send it in normalized form"),
                route: RouteLabel.none, limit: nil)
        case .route(let found):
            lineRoute = found
        }
        // A method override is part of the method: the route judged is the strictest it reaches.
        switch HTTPMethodOverrides.read(head) {
        case .failure(let invalid):
            return self.refuse(
                EnforcementError(.invalidMethodOverride, invalid.reason), route: self.label(of: lineRoute), limit: nil,
                routeIndex: lineRoute)
        case .success(let overrides) where !overrides.isEmpty:
            switch MethodOverrideRouting.route(
                table: self.routes, target: head.target[...], lineRoute: lineRoute, overrides: overrides)
            {
            case .failure(let error):
                return self.refuse(error, route: self.label(of: lineRoute), limit: nil, routeIndex: lineRoute)
            case .success(let judged):
                lineRoute = judged
            }
        case .success:
            break
        }
        guard let index = lineRoute else {
            return GateClassification(routeName: RouteLabel.none, upstream: nil, bufferBodyUpTo: nil)
        }
        // A passthrough route's classification is built once; and a copy of the whole
        // `RoutePolicy` retains every string in it, so only the enforced path makes one.
        if let passthrough = self.passthroughClassifications[index] { return passthrough }
        let route = self.routes.routes[index]
        // An attestation token is checked without the body, like a debug token.
        if TokenRouteCheck.offersToken(head, acceptsToken: route.acceptToken != nil) {
            return GateClassification(
                routeName: route.name, upstream: route.upstream, bufferBodyUpTo: nil, routeIndex: index,
                client: client, judgement: Self.judge(route, attribute: client))
        }
        // A DeviceCheck token is checked without the body, like a debug token.
        if head.headers[IdentityHeaders.deviceCheckToken] != nil {
            let judgement = Self.judge(route, attribute: Self.rolloutAttribute(head, client: client))
            if route.fallback != .deviceCheck && judgement.refusesBeforeBody {
                self.metrics.deviceCheckDecided(
                    stage: .token, result: EnforcementError.Code.deviceCheckNotAllowed.rawValue)
                return self.refuse(
                    .deviceCheckNotAllowed(route: route.name), route: route.name, limit: nil, routeIndex: index)
            }
            return GateClassification(
                routeName: route.name, upstream: route.upstream, bufferBodyUpTo: nil, routeIndex: index,
                client: client, judgement: judgement)
        }
        // A debug token is checked without the body: stream it (or refuse at once where the
        // route does not accept tokens).
        if head.headers[IdentityHeaders.debugToken] != nil {
            let judgement = Self.judge(route, attribute: Self.rolloutAttribute(head, client: client))
            if !route.allowDebugTokens && judgement.refusesBeforeBody {
                return self.refuse(
                    .debugTokenNotAllowed(route: route.name), route: route.name, limit: nil, routeIndex: index)
            }
            return GateClassification(
                routeName: route.name, upstream: route.upstream, bufferBodyUpTo: nil, routeIndex: index,
                client: client, judgement: judgement)
        }
        // Credentials are checked before the body: a request that cannot verify reserves no
        // body bytes. A fully enforced route refuses it here; monitor (and the monitored arm
        // of a gradual rollout) forwards it, streamed, and `decide` marks why.
        let credentials: AssertionCredentials
        switch AssertionCredentials.decode(head) {
        case .failure(let failure):
            let judgement = Self.judge(route, attribute: Self.rolloutAttribute(head, client: client))
            if judgement.refusesBeforeBody {
                return self.refuse(failure.error, route: route.name, limit: nil, routeIndex: index)
            }
            return GateClassification(
                routeName: route.name, upstream: route.upstream, bufferBodyUpTo: nil, routeIndex: index,
                client: client, judgement: judgement)
        case .success(let decoded):
            credentials = decoded
        }
        // `request` and `body` need the whole body: its digest or the body itself; `head` signs
        // no body, which then streams to the upstream as on an `off` route.
        return GateClassification(
            routeName: route.name, upstream: route.upstream,
            bufferBodyUpTo: route.binding == .head ? nil : route.maxBodyBytes, routeIndex: index,
            client: client, judgement: Self.judge(route, attribute: credentials.keyID), credentials: credentials)
    }

    /// The gateway endpoint at `path`, if any. Inlined: `classify` runs it on every request.
    @inline(__always)
    private func endpoint(at path: Substring) -> GateEndpoint? {
        let length = path.utf8.count
        let endpoints = self.policy.endpoints
        if Self.isEndpoint(path, length: length, endpoints.policy) { return .policy }
        if Self.isEndpoint(path, length: length, endpoints.report) { return .report }
        if Self.isEndpoint(path, length: length, endpoints.challenge) { return .challenge }
        if Self.isEndpoint(path, length: length, endpoints.deviceCheck) { return .deviceCheck }
        if Self.isEndpoint(path, length: length, endpoints.attest) { return .attest }
        // Only a policy with `tokens:` owns these paths; without it they are routed as any other.
        if self.policy.tokens != nil {
            if Self.isEndpoint(path, length: length, endpoints.token) { return .token }
            if Self.isEndpoint(path, length: length, AttestationTokens.jwksPath) { return .tokenKeys }
            if Self.isEndpoint(path, length: length, AttestationTokens.discoveryPath) { return .tokenDiscovery }
        }
        return nil
    }

    /// How a request on an enforce or monitor route is judged: a gradual rollout's arm is a
    /// function of `attribute` (`rolloutAttribute`), so every gateway judges a client alike.
    private static func judge(_ route: RoutePolicy, attribute: @autoclosure () -> String) -> RouteJudgement {
        switch route.mode {
        case .off:
            return RouteJudgement(mode: .passthrough)
        case .monitor:
            return RouteJudgement(mode: .monitor)
        case .enforce where route.enforcePercent >= 100:
            return RouteJudgement(mode: .enforce)
        case .enforce:
            let arm = RolloutArm.of(attribute(), percent: route.enforcePercent)
            return RouteJudgement(mode: arm == .enforce ? .enforce : .monitor, arm: arm)
        }
    }

    /// The stable client attribute of the rollout arm: the key ID (canonical base64) when
    /// the request carries a decodable one, else the client's address key (after
    /// `trusted_proxies`; an IPv6 client's /64, so privacy addresses keep their arm).
    private static func rolloutAttribute(_ head: HTTPRequestHead, client: String) -> String {
        if let text = head.headers[IdentityHeaders.keyID], let bytes = EndpointRequests.decodeBase64(text),
            bytes.count == 32
        {
            return EndpointRequests.encodeBase64(bytes)
        }
        return client
    }

    /// The route's name for logs and metrics, or "-".
    private func label(of index: Int?) -> String {
        index.map { self.routes.routes[$0].name } ?? RouteLabel.none
    }

    /// A classification that answers `error` at once; counted and (limits) logged here.
    private func refuse(
        _ error: EnforcementError, route: String, limit: String?, routeIndex: Int? = nil
    ) -> GateClassification {
        self.metrics.requestDecided(route: route, verdict: error.verdict)
        if let limit {
            self.metrics.limitRefused(limit: limit)
            if let suppressed = self.limitLog.admit() {
                Log.warning(
                    "rate_limited",
                    [("limit", limit), ("route", route), ("reason", error.reason), ("suppressed", String(suppressed))])
            }
        }
        return .refused(
            route: route, routeIndex: routeIndex, response: error.response, verdict: error.verdict)
    }

    /// Dispatches on what `classify` found: the route by its index, else the endpoint by its
    /// label; nothing is matched again.
    package func decide(
        _ head: consuming HTTPRequestHead,
        body: [UInt8]?,
        classification: GateClassification,
        promise: GateDecisionPromise
    ) {
        if let refusal = classification.refusal {
            promise.succeed(refusal)
            return
        }
        // A passthrough route decides at once: no closure to carry the decision.
        if let index = classification.routeIndex, classification.judgement?.mode == .passthrough {
            self.metrics.requestDecided(routeIndex: index, route: self.routes.routes[index].name, verdict: .skipped)
            let forwarded = IdentityHeaders.forwarded(head, status: .skipped)
            let decision = GateDecision.forward(forwarded, GateLogInfo(verdict: AttestVerdict.skipped))
            promise.succeed(self.identitySigner.map { Self.sign(decision, with: $0, now: self.now) } ?? decision)
            return
        }
        // Every forward carries gateway identity headers, whatever its status: sign them all,
        // last, once the decision's headers are complete (a debug token adds its name late).
        if let signer = self.identitySigner {
            let now = self.now
            self.decideUnsigned(head, body: body, classification: classification, loop: promise.loop) { decision in
                promise.succeed(Self.sign(decision, with: signer, now: now))
            }
            return
        }
        self.decideUnsigned(head, body: body, classification: classification, loop: promise.loop) { decision in
            promise.succeed(decision)
        }
    }

    /// `decision` with its forwarded head signed. Runs where the decision completed (the
    /// verification path): HMAC costs about a microsecond, ES256 some tens.
    static func sign(
        _ decision: GateDecision, with signer: IdentitySigner, now: @Sendable () -> Date
    ) -> GateDecision {
        guard case .forward(let head, let info) = decision else { return decision }
        let timestamp = Int64(now().timeIntervalSince1970.rounded(.down))
        do {
            return .forward(try signer.signed(head, timestamp: timestamp), info)
        } catch {
            // Only an OpenSSL allocation failure gets here. Fail closed: an unsigned request
            // would be refused by the upstream anyway, and this way the client sees why.
            Log.error("identity_signature_failed", [("code", error.code), ("reason", error.description)])
            return .respond(
                LocalResponse.jsonError(
                    status: 500, code: error.code, message: "the gateway could not sign the request for the upstream"),
                info)
        }
    }

    private func decideUnsigned(
        _ head: consuming HTTPRequestHead,
        body: [UInt8]?,
        classification: GateClassification,
        loop: EventLoop,
        completion: @escaping @Sendable (GateDecision) -> Void
    ) {
        guard let index = classification.routeIndex, let judgement = classification.judgement else {
            self.answerLocally(head, body: body, endpoint: classification.endpoint, loop: loop, completion: completion)
            return
        }
        // Passthrough routes were decided in `decide`; the route is read in place (see `classify`).
        if let tokenRoutes = self.tokenRoutes,
            TokenRouteCheck.offersToken(head, acceptsToken: self.routes.routes[index].acceptToken != nil)
        {
            tokenRoutes.verify(head, route: self.routes.routes[index], judgement: judgement, completion: completion)
            return
        }
        self.protectedRequests.verify(
            head, body: body ?? [], route: self.routes.routes[index], judgement: judgement,
            credentials: classification.credentials, traced: classification.traced, loop: loop, completion: completion)
    }

    /// A request on no route: an endpoint (the one `classify` found), or 404.
    private func answerLocally(
        _ head: HTTPRequestHead,
        body: [UInt8]?,
        endpoint: GateEndpoint?,
        loop: EventLoop,
        completion: @escaping @Sendable (GateDecision) -> Void
    ) {
        switch endpoint {
        case .policy:
            self.metrics.requestDecided(route: RouteLabel.policy, verdict: .skipped)
            let info = GateLogInfo(verdict: AttestVerdict.skipped)
            completion(.respond(self.policyDocument.response(to: head), info))
        case .challenge:
            self.challengeEndpoint.respond(to: head, completion: completion)
        case .report:
            self.reportEndpoint.respond(to: head, body: body, completion: completion)
        case .attest:
            self.attestEndpoint.respond(to: head, body: body, loop: loop, completion: completion)
        case .deviceCheck:
            self.deviceCheckEndpoint.respond(to: head, body: body, completion: completion)
        case .token:
            self.tokenEndpoint.respond(to: head, body: body, loop: loop, completion: completion)
        case .tokenKeys, .tokenDiscovery:
            let label = endpoint.map(\.routeLabel) ?? RouteLabel.none
            self.metrics.requestDecided(route: label, verdict: .skipped)
            let response = self.tokenKeySet.response(to: head, endpoint: endpoint ?? .tokenKeys)
            completion(.respond(response, GateLogInfo(verdict: AttestVerdict.skipped)))
        case nil:
            self.metrics.requestDecided(route: RouteLabel.none, verdict: .skipped)
            let error = EnforcementError(.noRoute, "no route matches \(head.answeredMethod) \(head.path)")
            completion(.respond(error.response, GateLogInfo(verdict: AttestVerdict.skipped)))
        }
    }
}
