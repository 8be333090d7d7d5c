import Dispatch
package import Foundation
package import HTTP1
package import Verification

/// App Attest enforcement at the gateway: the `RequestGate` of the main listeners.
///
/// - The challenge and attest endpoints (`endpoints:` in the policy, POST only) are
///   answered locally.
/// - A request on an `enforce` or `monitor` route must carry an assertion over its
///   clientData (`binding: request`: `ClientData.canonical`; `binding: body`: the raw body)
///   by an attested key; the store is the authority on counters, challenges and revocation.
/// - `off` routes are forwarded with `X-App-Attest-Status: skipped`.
/// - Every client-sent `X-App-Attest-*` / `X-App-Assertion` header is removed before
///   anything is forwarded; the gateway adds its own.
///
/// Immutable after init (a policy reload builds a new gate), so it is shared by every
/// connection queue. `decide` may run on any queue; its completion runs exactly once, on
/// the calling queue (at once, or later from the loop's own Redis connection), the store's
/// queue or the verification queue.
package final class AttestGate: RequestGate {
    /// Route names used in metrics and logs for requests that match no policy route.
    package enum RouteLabel {
        package static let challenge = "_challenge"
        package static let attest = "_attest"
        package static let policy = "_policy"
        package static let none = "-"
    }

    /// How many keys the in-process public-key cache holds (LRU beyond).
    package static let defaultKeyCacheCapacity = 16_384

    package let policy: GatewayPolicy
    private let routes: RouteTable
    private let store: any AttestStore
    private let metrics: any GateMetrics
    /// nil when the policy names no App ID (a passthrough-only policy: the loader requires
    /// App IDs as soon as a route enforces or monitors); the attest endpoint then refuses.
    private let attestationVerifier: AttestationVerifier?
    private let assertionVerifier = AssertionVerifier()
    private let acceptedAppIDs: Set<String>
    private let keys: KeyCache<CachedKey>
    private let now: @Sendable () -> Date
    /// Store failures are logged at most once a second (metrics count every one).
    private let storeErrorLog = LogThrottle()
    /// Challenge signing keys, shared by the fleet (process-wide: kept across reloads).
    private let challengeKeys: ChallengeKeyring
    /// Per-address token buckets for the anonymous endpoints (process-wide).
    private let endpointLimiter: AddressRateLimiter
    /// Refusals by a limit are logged at most once a second (metrics count every one).
    private let limitLog = LogThrottle()
    /// `GET <endpoints.policy>`: built once per policy (a reload builds a new gate).
    private let policyDocument: PolicyDocumentEndpoint

    /// Attestation verification (a certificate chain check, ~1 ms) and work after a store
    /// completion run here, never on the store's queue or a connection queue.
    private static let verificationQueue = DispatchQueue(
        label: "attest-gateway.verification",
        qos: .userInitiated,
        attributes: .concurrent
    )

    /// What the gate keeps of an attested key between requests.
    private struct CachedKey: Sendable {
        var publicKey: ECPublicKey
        var appID: AppID
        var environment: String
        /// Highest counter this process has seen accepted (or read) for the key: a
        /// pre-check only; the store decides.
        var counter: UInt32
        /// Launch validation at attestation (iOS 27+), nil when none was written.
        var validationCategory: UInt32?
        var bundleVersion: String?
    }

    /// - Parameters:
    ///   - trustRootsPEM: contents of the policy's `trust_roots` files (development only).
    ///   - now: the verification time of attestations (tests pin it).
    package init(
        policy: GatewayPolicy,
        store: any AttestStore,
        trustRootsPEM: [String] = [],
        metrics: any GateMetrics = NoGateMetrics(),
        keyCacheCapacity: Int = AttestGate.defaultKeyCacheCapacity,
        challengeKeys: ChallengeKeyring? = nil,
        endpointLimiter: AddressRateLimiter? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws(VerificationError) {
        self.policy = policy
        if let challengeKeys {
            self.challengeKeys = challengeKeys
        } else {
            // Tools and tests: the factory shares one keyring across reloads instead.
            let keyring = ChallengeKeyring(store: store)
            keyring.waitUntilLoaded(timeout: .seconds(2))
            self.challengeKeys = keyring
        }
        self.endpointLimiter =
            endpointLimiter
            ?? AddressRateLimiter(
                ratePerSecond: policy.limits.challengeRatePerSecond, burst: policy.limits.challengeBurst)
        self.routes = RouteTable(routes: policy.routes)
        self.store = store
        self.metrics = metrics
        self.attestationVerifier =
            policy.appIDs.isEmpty
            ? nil
            : try AttestationVerifier(
                appIDs: policy.appIDs,
                environment: Self.requirement(policy.environment),
                additionalTrustRootsPEM: trustRootsPEM
            )
        self.acceptedAppIDs = Set(policy.appIDs)
        self.keys = KeyCache(capacity: max(1, keyCacheCapacity))
        self.now = now
        self.policyDocument = PolicyDocumentEndpoint(policy: policy)
    }

    private static func requirement(_ environment: EnvironmentPolicy) -> EnvironmentRequirement {
        switch environment {
        case .production: return .production
        case .development: return .development
        case .any: return .any
        }
    }

    // MARK: - RequestGate

    /// `path == endpoint` when `path` has `length` UTF-8 bytes, comparing lengths first: most
    /// requests are on routes, and a generic Substring/String comparison costs ~100 instructions.
    @inline(__always)
    private static func isEndpoint(_ path: Substring, length: Int, _ endpoint: String) -> Bool {
        length == endpoint.utf8.count && path == endpoint
    }

    package func classify(_ head: HTTPRequestHead, client: String) -> GateClassification {
        let path = head.path
        let length = path.utf8.count
        if Self.isEndpoint(path, length: length, self.policy.endpoints.policy) {
            return GateClassification(routeName: RouteLabel.policy, upstream: nil, bufferBodyUpTo: nil)
        }
        let isChallenge = Self.isEndpoint(path, length: length, self.policy.endpoints.challenge)
        if isChallenge || Self.isEndpoint(path, length: length, self.policy.endpoints.attest) {
            let label = isChallenge ? RouteLabel.challenge : RouteLabel.attest
            guard head.method == "POST" else {
                return GateClassification(routeName: label, upstream: nil, bufferBodyUpTo: nil)
            }
            // Anonymous work: bounded per address before any of it is done.
            let admission = self.endpointLimiter.admit(client, nowNanoseconds: SystemCalls.monotonicNanoseconds())
            if case .limited(let seconds) = admission {
                return self.refuse(
                    EnforcementError(
                        .rateLimited,
                        "too many \(label == RouteLabel.challenge ? "challenge" : "attest") requests from this address (limits.challenge_rate_per_second)",
                        retryAfterSeconds: seconds),
                    route: label, limit: "challenge_rate")
            }
            // The challenge endpoint reads no body; the attest endpoint's is its JSON request.
            let buffer = label == RouteLabel.attest ? EndpointRequests.maxEndpointBodyBytes : nil
            return GateClassification(routeName: label, upstream: nil, bufferBodyUpTo: buffer)
        }
        let index: Int
        switch self.routes.lookup(method: head.method, target: head.target[...]) {
        case .noRoute:
            return GateClassification(routeName: RouteLabel.none, upstream: nil, bufferBodyUpTo: nil)
        case .ambiguous(let why):
            return self.refuse(
                EnforcementError(.ambiguousTarget, "the request target has \(why); send it in normalized form"),
                route: RouteLabel.none, limit: nil)
        case .route(let found):
            index = found
        }
        let route = self.routes.routes[index]
        switch route.mode {
        case .off:
            return GateClassification(
                routeName: route.name, upstream: route.upstream, bufferBodyUpTo: nil, routeIndex: index)
        case .enforce, .monitor:
            // A debug token is checked without the body: stream it (or refuse at once where the
            // route does not accept tokens).
            if head.headers[IdentityHeaders.debugToken] != nil {
                if !route.allowDebugTokens && route.mode == .enforce && route.enforcePercent >= 100 {
                    let error = EnforcementError(
                        .debugTokenNotAllowed, "route \(route.name) does not accept \(IdentityHeaders.debugToken)")
                    return self.refuse(error, route: route.name, limit: nil, routeIndex: index)
                }
                var classification = GateClassification(
                    routeName: route.name, upstream: route.upstream, bufferBodyUpTo: nil, routeIndex: index)
                classification.client = client
                return classification
            }
            // Credentials are checked before the body: a request that cannot verify reserves no
            // body bytes. A fully enforced route refuses it here; monitor (and the monitored arm
            // of a gradual rollout) forwards it, streamed, and `decide` marks why.
            if case .failure(let failure) = Self.credentials(head) {
                if route.mode == .enforce && route.enforcePercent >= 100 {
                    return self.refuse(failure.error, route: route.name, limit: nil, routeIndex: index)
                }
                var classification = GateClassification(
                    routeName: route.name, upstream: route.upstream, bufferBodyUpTo: nil, routeIndex: index)
                classification.client = client
                return classification
            }
            // Both bindings need the whole body: its digest (request) or the body itself.
            var classification = GateClassification(
                routeName: route.name,
                upstream: route.upstream,
                bufferBodyUpTo: route.maxBodyBytes,
                routeIndex: index
            )
            classification.client = client
            return classification
        }
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
        let decision = GateDecision.respond(error.response, GateLogInfo(verdict: error.verdict.rawValue))
        return GateClassification(
            routeName: route, upstream: nil, bufferBodyUpTo: nil, routeIndex: routeIndex, refusal: decision)
    }

    /// The decoded credential headers of a protected request.
    struct Credentials {
        /// Standard base64 of the 32-byte key ID, re-encoded (one spelling per key).
        var keyID: String
        var assertion: [UInt8]
    }

    /// Why a protected request's credentials cannot verify, with the key ID's prefix when known.
    struct CredentialFailure: Error {
        var error: EnforcementError
        var keyIDPrefix: String?
    }

    /// The credential headers, decoded, or why they cannot verify. Called from the head alone,
    /// so `classify` refuses such a request before its body, and again by `verifyProtected`.
    static func credentials(_ head: HTTPRequestHead) -> Result<Credentials, CredentialFailure> {
        guard let keyIDText = head.headers[IdentityHeaders.keyID],
            let assertionText = head.headers[IdentityHeaders.assertion]
        else {
            let error = EnforcementError(
                .assertionMissing, "\(IdentityHeaders.keyID) and \(IdentityHeaders.assertion) are required")
            return .failure(CredentialFailure(error: error))
        }
        // One value each: with two, which one the gateway checked would be ambiguous.
        for name in [IdentityHeaders.keyID, IdentityHeaders.assertion, IdentityHeaders.challenge]
        where Self.occurrences(of: name, in: head.headers) > 1 {
            let error = EnforcementError(.malformedAssertion, "\(name) appears more than once")
            return .failure(CredentialFailure(error: error))
        }
        guard let keyIDBytes = EndpointRequests.decodeBase64(keyIDText), keyIDBytes.count == 32 else {
            let error = EnforcementError(
                .malformedAssertion, "\(IdentityHeaders.keyID) is not the standard base64 of a 32-byte key ID")
            return .failure(CredentialFailure(error: error))
        }
        let keyID = EndpointRequests.encodeBase64(keyIDBytes)
        guard let assertion = EndpointRequests.decodeBase64(assertionText) else {
            let error = EnforcementError(.malformedAssertion, "\(IdentityHeaders.assertion) is not standard base64")
            return .failure(CredentialFailure(error: error, keyIDPrefix: String(keyID.prefix(8))))
        }
        return .success(Credentials(keyID: keyID, assertion: assertion))
    }

    package func decide(
        _ head: HTTPRequestHead,
        body: [UInt8]?,
        classification: GateClassification,
        completion: @escaping @Sendable (GateDecision) -> Void
    ) {
        if let refusal = classification.refusal {
            completion(refusal)
            return
        }
        let path = head.path
        // Route requests (the hot path) never reach the endpoint comparisons.
        let length = classification.routeIndex == nil ? path.utf8.count : -1
        if Self.isEndpoint(path, length: length, self.policy.endpoints.policy) {
            self.metrics.requestDecided(route: RouteLabel.policy, verdict: .skipped)
            let info = GateLogInfo(verdict: AttestVerdict.skipped.rawValue)
            completion(.respond(self.policyDocument.response(to: head), info))
            return
        }
        if Self.isEndpoint(path, length: length, self.policy.endpoints.challenge) {
            self.issueChallenge(head, completion: completion)
            return
        }
        if Self.isEndpoint(path, length: length, self.policy.endpoints.attest) {
            self.attest(head, body: body, completion: completion)
            return
        }
        guard let index = classification.routeIndex else {
            self.metrics.requestDecided(route: RouteLabel.none, verdict: .skipped)
            let error = EnforcementError(.noRoute, "no route matches \(head.answeredMethod) \(path)")
            completion(.respond(error.response, GateLogInfo(verdict: AttestVerdict.skipped.rawValue)))
            return
        }
        let route = self.routes.routes[index]
        switch route.mode {
        case .off:
            self.metrics.requestDecided(route: route.name, verdict: .skipped)
            let forwarded = IdentityHeaders.forwarded(head, status: .skipped)
            completion(.forward(forwarded, GateLogInfo(verdict: AttestVerdict.skipped.rawValue)))
        case .enforce, .monitor:
            self.verifyProtected(
                head, body: body ?? [], route: route, client: classification.client, completion: completion)
        }
    }

    // MARK: - Protected routes

    /// How verification of one protected request ended, before the route's mode applies.
    private enum Outcome {
        case verified(IdentityHeaders.Identity)
        /// Admitted by the named debug token.
        case debug(name: String)
        case failed(EnforcementError, keyIDPrefix: String?)
        case storeFailed(StoreError, operation: String, keyIDPrefix: String?)
    }

    /// Everything `verifyProtected` derived from the request, carried across store hops.
    private struct ProtectedRequest: Sendable {
        var head: HTTPRequestHead
        var route: RoutePolicy
        var keyID: String
        var assertion: [UInt8]
        var clientDataHash: [UInt8]
        /// Required by the route, present and checked; nil when the route needs none.
        var challenge: ChallengeTokens.Checked?
        var started: ContinuousClock.Instant

        var keyIDPrefix: String { String(self.keyID.prefix(8)) }
    }

    private func verifyProtected(
        _ head: HTTPRequestHead,
        body: [UInt8],
        route configured: RoutePolicy,
        client: String,
        completion: @escaping @Sendable (GateDecision) -> Void
    ) {
        let started = ContinuousClock.now
        // Gradual rollout: the monitor arm is this request judged as on a monitor route.
        var route = configured
        var arm: RolloutArm? = nil
        if route.mode == .enforce && route.enforcePercent < 100 {
            let chosen = RolloutArm.of(Self.rolloutAttribute(head, client: client), percent: route.enforcePercent)
            arm = chosen
            if chosen == .monitor { route.mode = .monitor }
        }
        let conclude: @Sendable (Outcome) -> Void = { [self, route, arm] outcome in
            self.conclude(outcome, head: head, route: route, arm: arm, started: started, completion: completion)
        }
        guard body.count <= route.maxBodyBytes else {
            conclude(
                .failed(EnforcementError(.bodyTooLarge, "body exceeds \(route.maxBodyBytes) bytes"), keyIDPrefix: nil)
            )
            return
        }
        if let token = head.headers[IdentityHeaders.debugToken] {
            self.verifyDebugToken(token, head: head, route: route, conclude: conclude)
            return
        }
        let keyID: String
        let assertion: [UInt8]
        switch Self.credentials(head) {
        case .failure(let failure):
            conclude(.failed(failure.error, keyIDPrefix: failure.keyIDPrefix))
            return
        case .success(let credentials):
            keyID = credentials.keyID
            assertion = credentials.assertion
        }
        let prefix = String(keyID.prefix(8))

        var challenge: String? = nil
        if route.challenge == .required {
            switch route.binding {
            case .request:
                challenge = head.headers[IdentityHeaders.challenge]
            case .body:
                challenge = EndpointRequests.challengeField(route.challengeField, in: body)
            }
            guard let value = challenge, !value.isEmpty else {
                let place =
                    route.binding == .request
                    ? "header \(IdentityHeaders.challenge)"
                    : "JSON string field \"\(route.challengeField)\" of the body"
                let error = EnforcementError(
                    .challengeMissing,
                    "route \(route.name) requires a challenge in the \(place)"
                )
                conclude(.failed(error, keyIDPrefix: prefix))
                return
            }
        }

        var checkedChallenge: ChallengeTokens.Checked? = nil
        if let challenge {
            switch self.checkChallenge(challenge) {
            case .failure(let error):
                if error.code == .storeError {
                    conclude(
                        .storeFailed(
                            StoreError(.unavailable, "the shared challenge key is not loaded"),
                            operation: "challenge_key", keyIDPrefix: prefix))
                } else {
                    conclude(.failed(error, keyIDPrefix: prefix))
                }
                return
            case .success(let checked):
                checkedChallenge = checked
            }
        }

        let clientData: [UInt8]
        switch route.binding {
        case .request:
            clientData = ClientData.canonical(
                method: head.method,
                target: head.target,
                body: body,
                challenge: challenge ?? ""
            )
        case .body:
            clientData = body
        }
        let request = ProtectedRequest(
            head: head,
            route: route,
            keyID: keyID,
            assertion: assertion,
            clientDataHash: SHA256.hash(clientData),
            challenge: checkedChallenge,
            started: started
        )

        if let cached = self.keys.value(for: keyID) {
            // ECDSA on the calling (connection) queue: ~40 µs, cheaper than a hop.
            self.verifyAssertion(request, key: cached, conclude: conclude)
            return
        }
        self.store.fetchKey(keyID: keyID) { [self] result in
            // On the store's queue: only classify the reply, then hop.
            switch result {
            case .failure(let error):
                conclude(.storeFailed(error, operation: "fetch_key", keyIDPrefix: prefix))
            case .success(nil):
                conclude(
                    .failed(EnforcementError(.unknownKey, "no attested key with this key ID"), keyIDPrefix: prefix)
                )
            case .success(let record?):
                if record.status == .revoked {
                    conclude(.failed(EnforcementError(.revokedKey, "the key was revoked"), keyIDPrefix: prefix))
                    return
                }
                Self.verificationQueue.async { [self] in
                    let key: CachedKey
                    do throws(VerificationError) {
                        key = CachedKey(
                            publicKey: try ECPublicKey(x962: record.publicKey),
                            appID: AppID(record.appID),
                            environment: record.environment,
                            counter: record.counter,
                            validationCategory: record.validationCategory,
                            bundleVersion: record.bundleVersion
                        )
                    } catch {
                        Log.error("key_record_invalid", [("key_id_prefix", prefix), ("reason", error.reason)])
                        conclude(
                            .failed(
                                EnforcementError(.internalError, "stored public key is invalid"),
                                keyIDPrefix: prefix
                            )
                        )
                        return
                    }
                    self.keys.set(key, for: keyID)
                    self.verifyAssertion(request, key: key, conclude: conclude)
                }
            }
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

    /// `X-App-Attest-Debug-Token` instead of an assertion: accepted only where the route
    /// allows it; every use is logged with the token's name.
    private func verifyDebugToken(
        _ token: String,
        head: HTTPRequestHead,
        route: RoutePolicy,
        conclude: @escaping @Sendable (Outcome) -> Void
    ) {
        guard route.allowDebugTokens else {
            let error = EnforcementError(
                .debugTokenNotAllowed, "route \(route.name) does not accept \(IdentityHeaders.debugToken)")
            conclude(.failed(error, keyIDPrefix: nil))
            return
        }
        guard Self.occurrences(of: IdentityHeaders.debugToken, in: head.headers) == 1,
            DebugTokens.isWellFormed(token)
        else {
            let error = EnforcementError(
                .debugTokenInvalid, "\(IdentityHeaders.debugToken) is not one token made by debug-tokens create")
            conclude(.failed(error, keyIDPrefix: nil))
            return
        }
        let routeName = route.name
        self.store.useDebugToken(digest: DebugTokens.digest(token), now: self.now()) { result in
            switch result {
            case .failure(let error):
                conclude(.storeFailed(error, operation: "use_debug_token", keyIDPrefix: nil))
            case .success(.accepted(let name)):
                Log.info("debug_token_used", [("name", name), ("route", routeName)])
                conclude(.debug(name: name))
            case .success(.expired(let name)):
                Log.warning("debug_token_expired", [("name", name), ("route", routeName)])
                conclude(
                    .failed(EnforcementError(.debugTokenInvalid, "debug token \(name) has expired"), keyIDPrefix: nil))
            case .success(.unknown):
                conclude(
                    .failed(
                        EnforcementError(.debugTokenInvalid, "unknown or revoked debug token"), keyIDPrefix: nil))
            }
        }
    }

    private static func occurrences(of name: String, in headers: HTTPHeaders) -> Int {
        var count = 0
        for field in headers where field.name.caseInsensitiveEquals(name) { count += 1 }
        return count
    }

    /// Key policy checks and the assertion itself; then the store's challenge and counter.
    private func verifyAssertion(
        _ request: ProtectedRequest,
        key: CachedKey,
        conclude: @escaping @Sendable (Outcome) -> Void
    ) {
        let prefix = request.keyIDPrefix
        if let mismatch = self.environmentMismatch(key.environment) {
            conclude(.failed(EnforcementError(.environmentMismatch, mismatch), keyIDPrefix: prefix))
            return
        }
        guard self.acceptedAppIDs.contains(key.appID.value) else {
            let error = EnforcementError(
                .appIDMismatch,
                "key's App ID \(key.appID.value) is not accepted by the policy"
            )
            conclude(.failed(error, keyIDPrefix: prefix))
            return
        }
        let result: AssertionResult
        do throws(VerificationError) {
            // The cached counter is at most the stored one, so this pre-check only rejects
            // what the store would reject too (replays, without a round trip).
            result = try self.assertionVerifier.verify(
                assertionObject: request.assertion,
                clientDataHash: request.clientDataHash,
                publicKey: key.publicKey,
                appIDs: [key.appID],
                previousCounter: Self.lowestRefused(highest: key.counter, window: request.route.counterWindow)
            )
        } catch {
            let code = EnforcementError.Code.assertion(error.code)
            if code == .internalError {
                Log.error("assertion_internal_error", [("key_id_prefix", prefix), ("reason", error.reason)])
            }
            conclude(.failed(EnforcementError(code, error.reason), keyIDPrefix: prefix))
            return
        }
        let launch = result.launchValidation
        self.metrics.launchValidation(category: launch.category, bundleVersion: launch.bundleVersion)
        if let attested = key.validationCategory, launch.category != attested {
            let found = launch.category.map(LaunchValidationCategory.name(of:)) ?? "none"
            let error = EnforcementError(
                .validationCategoryMismatch,
                "the assertion's launch validation category (\(found)) differs from the key's attested \(LaunchValidationCategory.name(of: attested)): the binary was re-signed"
            )
            conclude(.failed(error, keyIDPrefix: prefix))
            return
        }
        let category = launch.category ?? key.validationCategory
        let bundleVersion = launch.bundleVersion ?? key.bundleVersion
        if let refusal = request.route.appValidation?.refusal(category: category, bundleVersion: bundleVersion) {
            conclude(.failed(refusal, keyIDPrefix: prefix))
            return
        }
        let identity = IdentityHeaders.Identity(
            keyID: request.keyID,
            appID: key.appID.value,
            environment: key.environment,
            counter: result.counter,
            validationCategory: category.map(LaunchValidationCategory.name(of:)),
            bundleVersion: bundleVersion
        )
        guard let challenge = request.challenge else {
            self.advanceCounter(request, identity: identity, conclude: conclude)
            return
        }
        self.redeem(challenge) { [self] redeemed in
            switch redeemed {
            case .failure(let error):
                conclude(.storeFailed(error, operation: "redeem_challenge", keyIDPrefix: prefix))
            case .success(false):
                let error = EnforcementError(.challengeInvalid, "the challenge was already used")
                conclude(.failed(error, keyIDPrefix: prefix))
            case .success(true):
                self.advanceCounter(request, identity: identity, conclude: conclude)
            }
        }
    }

    private func advanceCounter(
        _ request: ProtectedRequest,
        identity: IdentityHeaders.Identity,
        conclude: @escaping @Sendable (Outcome) -> Void
    ) {
        let keyID = request.keyID
        let prefix = request.keyIDPrefix
        let counter = identity.counter
        let window = request.route.counterWindow
        self.store.advanceCounter(keyID: keyID, to: counter, window: window) { [self] result in
            switch result {
            case .failure(let error):
                conclude(.storeFailed(error, operation: "advance_counter", keyIDPrefix: prefix))
            case .success(.advanced), .success(.acceptedOutOfOrder):
                self.keys.update(keyID) { $0.counter = max($0.counter, counter) }
                conclude(.verified(identity))
            case .success(.notIncreasing(let stored)):
                self.keys.update(keyID) { $0.counter = max($0.counter, stored) }
                let reason =
                    window == 0
                    ? "assertion counter \(counter) is not greater than stored counter \(stored)"
                    : "assertion counter \(counter) was already used, or is not within the window of \(window) counters up to the highest stored \(stored)"
                conclude(.failed(EnforcementError(.counterReplay, reason), keyIDPrefix: prefix))
            case .success(.unknownKey):
                self.keys.remove(keyID)
                conclude(
                    .failed(EnforcementError(.unknownKey, "no attested key with this key ID"), keyIDPrefix: prefix)
                )
            case .success(.revoked):
                self.keys.remove(keyID)
                conclude(.failed(EnforcementError(.revokedKey, "the key was revoked"), keyIDPrefix: prefix))
            }
        }
    }

    /// The counter the assertion must exceed: the highest one (strict), or the highest minus
    /// the window (`CounterWindow`: `c > h - N`); the store then checks the seen-map.
    static func lowestRefused(highest: UInt32, window: Int) -> UInt32 {
        guard window > 0 else { return highest }
        let size = UInt32(clamping: window)
        return highest > size ? highest - size : 0
    }

    /// nil when a key of `environment` is accepted by the policy, else the reason.
    private func environmentMismatch(_ environment: String) -> String? {
        switch self.policy.environment {
        case .any: return nil
        case .production, .development:
            let wanted = self.policy.environment.rawValue
            return environment == wanted ? nil : "a \(environment) key is not accepted under environment \(wanted)"
        }
    }

    /// Applies the route's mode and `on_store_error` to an outcome; records metrics.
    private func conclude(
        _ outcome: Outcome,
        head: HTTPRequestHead,
        route: RoutePolicy,
        arm: RolloutArm?,
        started: ContinuousClock.Instant,
        completion: @Sendable (GateDecision) -> Void
    ) {
        let elapsed = ContinuousClock.now - started
        self.metrics.verificationLatency(seconds: Self.seconds(elapsed))
        let decision: GateDecision
        let verdict: AttestVerdict
        switch outcome {
        case .verified(let identity):
            verdict = .verified
            decision = .forward(
                IdentityHeaders.forwarded(head, status: .verified, identity: identity, arm: arm),
                GateLogInfo(
                    verdict: verdict.rawValue, keyIDPrefix: String(identity.keyID.prefix(8)), arm: arm?.rawValue)
            )
        case .debug(let name):
            verdict = .debug
            var forwarded = IdentityHeaders.forwarded(head, status: .debug, arm: arm)
            forwarded.headers.add(name: IdentityHeaders.debugTokenName, value: name)
            decision = .forward(forwarded, GateLogInfo(verdict: verdict.rawValue, arm: arm?.rawValue))
        case .failed(let error, let prefix):
            verdict = error.verdict
            let info = GateLogInfo(verdict: verdict.rawValue, keyIDPrefix: prefix, arm: arm?.rawValue)
            // A body over the cap is refused in every mode: the cap bounds memory.
            if route.mode == .monitor && error.code != .bodyTooLarge {
                decision = .forward(
                    IdentityHeaders.forwarded(head, status: .failed(reason: error.code.rawValue), arm: arm),
                    info
                )
            } else {
                decision = .respond(error.response, info)
            }
        case .storeFailed(let error, let operation, let prefix):
            verdict = .storeError
            self.metrics.storeError(operation: operation, kind: error.kind)
            self.logStoreError(error, operation: operation, route: route.name)
            let info = GateLogInfo(verdict: verdict.rawValue, keyIDPrefix: prefix, arm: arm?.rawValue)
            if route.onStoreError == .allow || route.mode == .monitor {
                decision = .forward(
                    IdentityHeaders.forwarded(
                        head, status: .unverified(reason: AttestVerdict.storeError.rawValue), arm: arm),
                    info
                )
            } else {
                let denial = EnforcementError(.storeError, "attestation state is unavailable; retry later")
                decision = .respond(denial.response, info)
            }
        }
        self.metrics.requestDecided(route: route.name, verdict: verdict)
        if let arm {
            self.metrics.rolloutDecided(route: route.name, arm: arm, verdict: verdict)
        }
        completion(decision)
    }

    private func logStoreError(_ error: StoreError, operation: String, route: String) {
        guard let suppressed = self.storeErrorLog.admit() else { return }
        Log.warning(
            "store_error",
            [
                ("route", route), ("operation", operation), ("error", error.description),
                ("suppressed_since_last", String(suppressed)),
            ]
        )
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    // MARK: - Challenge endpoint

    private func issueChallenge(_ head: HTTPRequestHead, completion: @escaping @Sendable (GateDecision) -> Void) {
        let respond: @Sendable (Result<String, EnforcementError>) -> Void = { [self] result in
            switch result {
            case .success(let challenge):
                self.metrics.challengeIssued()
                self.metrics.requestDecided(route: RouteLabel.challenge, verdict: .skipped)
                let ttl = self.policy.challengeTTLSeconds
                let body = JSONText.object([("challenge", JSONText.quote(challenge)), ("expires_in", String(ttl))])
                var headers = HTTPHeaders()
                headers.add(name: "Content-Type", value: "application/json")
                headers.add(name: "Cache-Control", value: "no-store")
                let response = LocalResponse(status: 200, headers: headers, body: Array(body.utf8))
                completion(.respond(response, GateLogInfo(verdict: AttestVerdict.skipped.rawValue)))
            case .failure(let error):
                self.metrics.requestDecided(route: RouteLabel.challenge, verdict: error.verdict)
                completion(.respond(error.response, GateLogInfo(verdict: error.verdict.rawValue)))
            }
        }
        guard head.method == "POST" else {
            respond(
                .failure(EnforcementError(.methodNotAllowed, "\(self.policy.endpoints.challenge) accepts POST only"))
            )
            return
        }
        // Stateless: minting writes nothing to the store (see `ChallengeTokens`).
        guard let tokens = self.challengeTokens() else {
            self.metrics.storeError(operation: "challenge_key", kind: .unavailable)
            respond(.failure(EnforcementError(.storeError, "challenges are unavailable; retry later")))
            return
        }
        respond(.success(tokens.mint(now: self.unixNow())))
    }

    /// The challenge keys with the policy's TTL; nil while a store-shared key is loading.
    private func challengeTokens() -> ChallengeTokens? {
        guard let keys = self.challengeKeys.keys() else { return nil }
        return ChallengeTokens(keys: keys, ttlSeconds: self.policy.challengeTTLSeconds)
    }

    private func unixNow() -> Int64 { Int64(self.now().timeIntervalSince1970.rounded(.down)) }

    /// Checks a challenge's tag and expiry without I/O: the error to answer, or the checked token.
    private func checkChallenge(_ text: String) -> Result<ChallengeTokens.Checked, EnforcementError> {
        guard let tokens = self.challengeTokens() else {
            return .failure(EnforcementError(.storeError, "challenges are unavailable; retry later"))
        }
        switch tokens.check(text, now: self.unixNow()) {
        case .success(let checked): return .success(checked)
        case .failure(let problem): return .failure(EnforcementError(.challengeInvalid, problem.rawValue))
        }
    }

    /// Redeems a checked challenge once, fleet-wide: the store's "used" marker lives as long as
    /// the challenge would have. Called only for requests that otherwise verified.
    private func redeem(
        _ challenge: ChallengeTokens.Checked,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        self.store.putChallenge(challenge.text, ttlSeconds: challenge.remainingSeconds + 1, completion: completion)
    }

    // MARK: - Attest endpoint

    private func attest(
        _ head: HTTPRequestHead,
        body: [UInt8]?,
        completion: @escaping @Sendable (GateDecision) -> Void
    ) {
        let finish: @Sendable (Result<AttestedKey, EnforcementError>) -> Void = { [self] result in
            switch result {
            case .success(let attested):
                self.metrics.attestation(result: AttestVerdict.verified.rawValue)
                self.metrics.requestDecided(route: RouteLabel.attest, verdict: .verified)
                let keyID = EndpointRequests.encodeBase64(attested.keyID)
                var fields = [
                    ("key_id", JSONText.quote(keyID)),
                    ("environment", JSONText.quote(attested.environment.rawValue)),
                    ("app_id", JSONText.quote(attested.appID)),
                ]
                if let category = attested.launchValidation.category {
                    fields.append(("validation_category", JSONText.quote(LaunchValidationCategory.name(of: category))))
                }
                if let version = attested.launchValidation.bundleVersion {
                    fields.append(("bundle_version", JSONText.quote(version)))
                }
                let body = JSONText.object(fields)
                var headers = HTTPHeaders()
                headers.add(name: "Content-Type", value: "application/json")
                let response = LocalResponse(status: 201, headers: headers, body: Array(body.utf8))
                let info = GateLogInfo(verdict: AttestVerdict.verified.rawValue, keyIDPrefix: String(keyID.prefix(8)))
                completion(.respond(response, info))
            case .failure(let error):
                self.metrics.attestation(result: error.code.rawValue)
                self.metrics.requestDecided(route: RouteLabel.attest, verdict: error.verdict)
                completion(.respond(error.response, GateLogInfo(verdict: error.verdict.rawValue)))
            }
        }
        guard head.method == "POST" else {
            finish(.failure(EnforcementError(.methodNotAllowed, "\(self.policy.endpoints.attest) accepts POST only")))
            return
        }
        let request: EndpointRequests.AttestRequest
        do throws(EnforcementError) {
            request = try EndpointRequests.parseAttestRequest(body ?? [])
        } catch {
            finish(.failure(error))
            return
        }
        // The challenge's tag and expiry first (no I/O); it is redeemed only once the
        // attestation verified, so a failed attempt writes nothing to the store.
        let checked: ChallengeTokens.Checked
        switch self.checkChallenge(request.challenge) {
        case .failure(let error):
            finish(.failure(error))
            return
        case .success(let value):
            checked = value
        }
        Self.verificationQueue.async { [self] in
            self.verifyAttestation(request, challenge: checked, finish: finish)
        }
    }

    private func verifyAttestation(
        _ request: EndpointRequests.AttestRequest,
        challenge: ChallengeTokens.Checked,
        finish: @escaping @Sendable (Result<AttestedKey, EnforcementError>) -> Void
    ) {
        let attestedAt = self.now()
        guard let verifier = self.attestationVerifier else {
            let code = EnforcementError.Code.attestation(.appIDMismatch)
            finish(.failure(EnforcementError(code, "the policy accepts no App ID (app_ids is empty)")))
            return
        }
        let attested: AttestedKey
        do throws(VerificationError) {
            attested = try verifier.verify(
                attestationObject: request.attestation,
                keyID: request.keyID,
                clientDataHash: SHA256.hash(Array(request.challenge.utf8)),
                at: attestedAt
            )
        } catch {
            let code = EnforcementError.Code.attestation(error.code)
            if code == .internalError {
                Log.error("attestation_internal_error", [("reason", error.reason)])
            }
            finish(.failure(EnforcementError(code, error.reason)))
            return
        }
        let record = KeyRecord(
            keyID: EndpointRequests.encodeBase64(attested.keyID),
            publicKey: attested.publicKey,
            counter: 0,
            appID: attested.appID,
            environment: attested.environment.rawValue,
            receipt: attested.receipt,
            attestedAt: attestedAt,
            validationCategory: attested.launchValidation.category,
            bundleVersion: attested.launchValidation.bundleVersion
        )
        self.redeem(challenge) { [self] redeemed in
            switch redeemed {
            case .failure(let error):
                self.metrics.storeError(operation: "redeem_challenge", kind: error.kind)
                self.logStoreError(error, operation: "redeem_challenge", route: RouteLabel.attest)
                finish(.failure(EnforcementError(.storeError, "attestation state is unavailable; retry later")))
            case .success(false):
                finish(.failure(EnforcementError(.challengeInvalid, "the challenge was already used")))
            case .success(true):
                self.createKey(record, attested: attested, finish: finish)
            }
        }
    }

    private func createKey(
        _ record: KeyRecord,
        attested: AttestedKey,
        finish: @escaping @Sendable (Result<AttestedKey, EnforcementError>) -> Void
    ) {
        self.store.createKey(record) { [self] created in
            switch created {
            case .failure(let error):
                self.metrics.storeError(operation: "create_key", kind: error.kind)
                self.logStoreError(error, operation: "create_key", route: RouteLabel.attest)
                finish(.failure(EnforcementError(.storeError, "attestation state is unavailable; retry later")))
            case .success(.alreadyExists):
                finish(.failure(EnforcementError(.keyAlreadyAttested, "this key ID is already attested")))
            case .success(.created):
                finish(.success(attested))
            }
        }
    }
}
