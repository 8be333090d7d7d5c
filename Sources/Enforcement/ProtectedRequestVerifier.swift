import Dispatch
import Foundation
import GateContract
import GatewayIO
import HTTP1
import KeyStore
import PolicyModel
import RedisClient
import Verification

/// Verification of one request on an `enforce` or `monitor` route: an assertion over its
/// clientData (`binding: request`: `ClientData.canonical`; `binding: body`: the raw body) by an
/// attested key, or a debug token where the route allows one.
///
/// Steps: body cap; debug token or credentials; the route's challenge (tag and expiry, no
/// I/O); the key (in-process cache, else the store); environment, App ID, the assertion and
/// launch validation; then the store redeems the challenge and advances the counter. The
/// store is the authority on counters, challenges and revocation; the cache only saves the
/// `fetchKey` round trip.
///
/// Immutable; `verify` runs on a connection's loop, and its store calls go out from that loop
/// on the loop's own Redis connection. A cached key is checked on the loop (ECDSA costs less
/// than a hop); a key fetched from the store is parsed and checked on the verification queue,
/// and its challenge and counter go back to the loop. The completion runs exactly once, on the
/// loop, or on the verification queue for a refusal found there.
final class ProtectedRequestVerifier: Sendable {
    /// What the verifier keeps of an attested key between requests.
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
        /// The key access-control extension's verdict (macOS 27+), nil when none.
        var keyAccessPolicy: String?
        /// App Attest, or an Android Keystore key (`AndroidRequestCheck`).
        var platform: AttestPlatform = .ios
        /// Android: when the key's last Play Integrity verdict was accepted (`reverify_after`).
        var playIntegrityVerifiedAt: Date? = nil
        /// Android: the key's Play Integrity verdict, forwarded as `X-App-Attest-Play-Integrity`.
        var playIntegrityVerdict: String? = nil
    }

    /// Everything `verify` derived from the request, carried across store hops.
    ///
    /// A class: each hop's closure captures one reference, where a struct (the head, the
    /// route and the credentials) was copied field by field, a retain for each.
    private final class Request: Sendable {
        let head: HTTPRequestHead
        let route: RoutePolicy
        let keyID: String
        let assertion: [UInt8]
        let clientDataHash: [UInt8]
        /// Required by the route, present and checked; nil when the route needs none.
        let challenge: ChallengeTokens.Checked?
        /// The connection's loop: the store is called from it.
        let loop: EventLoop
        /// Where the counter call's timing goes, when tracing is on.
        let storeCall: StoreCallRecorder?

        init(
            head: HTTPRequestHead, route: RoutePolicy, keyID: String, assertion: [UInt8], clientDataHash: [UInt8],
            challenge: ChallengeTokens.Checked?, loop: EventLoop, storeCall: StoreCallRecorder?
        ) {
            self.loop = loop
            self.storeCall = storeCall
            self.head = head
            self.route = route
            self.keyID = keyID
            self.assertion = assertion
            self.clientDataHash = clientDataHash
            self.challenge = challenge
        }
    }

    private let environment: EnvironmentPolicy
    private let acceptedAppIDs: Set<String>
    private let assertionVerifier = AssertionVerifier()
    private let androidRequests: AndroidRequestCheck
    private let keys: KeyCache<CachedKey>
    private let challenges: IssuedChallenges
    private let store: any AttestStore
    private let fraudRisk: FraudRiskGateHooks
    let metrics: any GateMetrics
    private let storeFailures: StoreFailureReporter
    /// The store's kind, for the store call's span.
    private let storeSystem: StoreCallSpan.System
    private let verificationQueue: DispatchQueue
    let now: @Sendable () -> Date
    /// Gateway DeviceCheck tokens on `fallback: devicecheck` routes; nil without `apple:`.
    let deviceCheckTokens: DeviceCheckTokenCheck?

    /// - Parameters:
    ///   - keyCacheCapacity: how many keys the in-process cache holds (LRU beyond).
    ///   - verificationQueue: parsing a fetched key and the work after it run there, never on
    ///     the store's queue.
    init(
        environment: EnvironmentPolicy,
        appIDs: [String],
        keyCacheCapacity: Int,
        challenges: IssuedChallenges,
        store: any AttestStore,
        fraudRisk: FraudRiskGateHooks,
        metrics: any GateMetrics,
        storeFailures: StoreFailureReporter,
        verificationQueue: DispatchQueue,
        now: @escaping @Sendable () -> Date,
        deviceCheckTokens: DeviceCheckTokenCheck? = nil,
        androidPackages: [String] = [],
        androidReverifyAfter: [String: Duration] = [:]
    ) {
        self.androidRequests = AndroidRequestCheck(packages: Set(androidPackages), reverifyAfter: androidReverifyAfter)
        self.deviceCheckTokens = deviceCheckTokens
        self.environment = environment
        self.acceptedAppIDs = Set(appIDs)
        self.keys = KeyCache(capacity: max(1, keyCacheCapacity))
        self.challenges = challenges
        self.store = store
        self.fraudRisk = fraudRisk
        self.metrics = metrics
        self.storeFailures = storeFailures
        self.storeSystem = store is MemoryStore ? .memory : .redis
        self.verificationQueue = verificationQueue
        self.now = now
    }

    /// Verifies `head` with its whole `body` on `route`, judged as `classify` decided;
    /// `credentials` are the head's, when `classify` could decode them (else decoded here, for
    /// the refusal).
    func verify(
        _ head: HTTPRequestHead,
        body: [UInt8],
        route: RoutePolicy,
        judgement: RouteJudgement,
        credentials decoded: AssertionCredentials? = nil,
        traced: Bool = false,
        loop: EventLoop,
        completion: @escaping @Sendable (GateDecision) -> Void
    ) {
        let started = SystemCalls.monotonicNanoseconds()
        // A sampled request: the counter call's timing is noted for its trace (one branch when not).
        let storeCall = traced ? StoreCallRecorder() : nil
        let conclude: @Sendable (ProtectedRequestOutcome) -> Void = { [self, route] outcome in
            self.conclude(
                outcome, head: head, route: route, judgement: judgement, started: started,
                storeCall: storeCall?.recorded, completion: completion)
        }
        self.verifyOutcome(
            head, body: body, route: route, credentials: decoded, loop: loop, storeCall: storeCall, conclude: conclude)
    }

    /// The checks of `verify` without the route's mode applied: `conclude` gets the outcome
    /// (the token endpoint turns a verified one into a token instead of a forward).
    func verifyOutcome(
        _ head: HTTPRequestHead,
        body: [UInt8],
        route: RoutePolicy,
        credentials decoded: AssertionCredentials? = nil,
        loop: EventLoop,
        storeCall: StoreCallRecorder? = nil,
        conclude: @escaping @Sendable (ProtectedRequestOutcome) -> Void
    ) {
        guard body.count <= route.maxBodyBytes else {
            conclude(
                .failed(EnforcementError(.bodyTooLarge, "body exceeds \(route.maxBodyBytes) bytes"), keyID: nil)
            )
            return
        }
        if let token = head.headers[IdentityHeaders.deviceCheckToken] {
            self.verifyDeviceCheckToken(token, head: head, route: route, conclude: conclude)
            return
        }
        if let token = head.headers[IdentityHeaders.debugToken] {
            self.verifyDebugToken(token, head: head, route: route, conclude: conclude)
            return
        }
        let credentials: AssertionCredentials
        switch decoded.map({ .success($0) }) ?? AssertionCredentials.decode(head) {
        case .failure(let failure):
            conclude(.failed(failure.error, keyID: failure.keyID))
            return
        case .success(let decoded):
            credentials = decoded
        }
        let keyID = credentials.keyID
        let loggedKeyID = keyID

        var challenge: String? = nil
        if route.challenge == .required {
            switch route.binding {
            case .request, .head:
                challenge = head.headers[IdentityHeaders.challenge]
            case .body:
                challenge = EndpointRequests.challengeField(route.challengeField, in: body)
            }
            guard let value = challenge, !value.isEmpty else {
                let place =
                    route.binding != .body
                    ? "header \(IdentityHeaders.challenge)"
                    : "JSON string field \"\(route.challengeField)\" of the body"
                let error = EnforcementError(
                    .challengeMissing,
                    "route \(route.name) requires a challenge in the \(place)"
                )
                conclude(.failed(error, keyID: loggedKeyID))
                return
            }
        }

        var checkedChallenge: ChallengeTokens.Checked? = nil
        if let challenge {
            switch self.challenges.check(challenge) {
            case .failure(let error):
                if error.code == .storeError {
                    conclude(
                        .storeFailed(
                            StoreError(.unavailable, "the shared challenge key is not loaded"),
                            operation: "challenge_key", keyID: loggedKeyID))
                } else {
                    conclude(.failed(error, keyID: loggedKeyID))
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
        case .head:
            clientData = ClientData.canonicalHead(
                method: head.method, target: head.target, challenge: challenge ?? "")
        }
        let request = Request(
            head: head,
            route: route,
            keyID: keyID,
            assertion: credentials.assertion,
            clientDataHash: SHA256.hash(clientData),
            challenge: checkedChallenge,
            loop: loop,
            storeCall: storeCall
        )

        if let cached = self.keys.value(for: keyID),
            // A verdict too old in this process's copy may be fresh in the store (re-verified
            // through another gateway): the store decides.
            // (Only Android keys of apps with `reverify_after`: no clock read on the others' path.)
            !(cached.platform == .android && !self.androidRequests.reverifyAfter.isEmpty
                && self.androidRequests.needsReverification(
                    package: cached.appID.value, verifiedAt: cached.playIntegrityVerifiedAt, now: self.now()))
        {
            // ECDSA on the loop: ~40 µs, cheaper than a hop there and back.
            guard let identity = self.checkAssertion(request, key: cached, conclude: conclude) else { return }
            self.redeemAndAdvance(request, identity: identity, conclude: conclude)
            return
        }
        self.fetchKey(request, conclude: conclude)
    }

    /// `X-App-Attest-Debug-Token` instead of an assertion: accepted only where the route
    /// allows it; every use is logged with the token's name.
    private func verifyDebugToken(
        _ token: String,
        head: HTTPRequestHead,
        route: RoutePolicy,
        conclude: @escaping @Sendable (ProtectedRequestOutcome) -> Void
    ) {
        guard route.allowDebugTokens else {
            conclude(.failed(.debugTokenNotAllowed(route: route.name), keyID: nil))
            return
        }
        guard IdentityHeaders.occurrences(of: IdentityHeaders.debugToken, in: head.headers) == 1,
            DebugTokens.isWellFormed(token)
        else {
            let error = EnforcementError(
                .debugTokenInvalid, "\(IdentityHeaders.debugToken) is not one token made by debug-tokens create")
            conclude(.failed(error, keyID: nil))
            return
        }
        let routeName = route.name
        self.store.useDebugToken(digest: DebugTokens.digest(token), now: self.now()) { result in
            switch result {
            case .failure(let error):
                conclude(.storeFailed(error, operation: "use_debug_token", keyID: nil))
            case .success(.accepted(let name)):
                Log.info("debug_token_used", [("name", name), ("route", routeName)])
                conclude(.debug(name: name))
            case .success(.expired(let name)):
                Log.warning("debug_token_expired", [("name", name), ("route", routeName)])
                conclude(
                    .failed(EnforcementError(.debugTokenInvalid, "debug token \(name) has expired"), keyID: nil))
            case .success(.unknown):
                conclude(
                    .failed(
                        EnforcementError(.debugTokenInvalid, "unknown or revoked debug token"), keyID: nil))
            }
        }
    }

    /// The key from the store (not cached in this process yet), parsed and cached.
    private func fetchKey(_ request: Request, conclude: @escaping @Sendable (ProtectedRequestOutcome) -> Void) {
        let keyID = request.keyID
        let loggedKeyID = request.keyID
        self.store.fetchKey(keyID: keyID) { [self] result in
            // On the loop: only classify the reply, then hop.
            switch result {
            case .failure(let error):
                conclude(.storeFailed(error, operation: "fetch_key", keyID: loggedKeyID))
            case .success(nil):
                conclude(.failed(.unknownKey(), keyID: loggedKeyID))
            case .success(let record?):
                if record.status == .revoked {
                    conclude(.failed(.revokedKey(), keyID: loggedKeyID))
                    return
                }
                self.verificationQueue.async { [self] in
                    let key: CachedKey
                    do throws(VerificationError) {
                        key = CachedKey(
                            publicKey: try ECPublicKey(x962: record.publicKey),
                            appID: AppID(record.appID),
                            environment: record.environment,
                            counter: record.counter,
                            validationCategory: record.validationCategory,
                            bundleVersion: record.bundleVersion,
                            keyAccessPolicy: record.keyAccessPolicy,
                            platform: record.platform == KeyRecord.androidPlatform ? .android : .ios,
                            playIntegrityVerifiedAt: record.playIntegrityVerifiedAt,
                            playIntegrityVerdict: record.playIntegrityVerdict
                        )
                    } catch {
                        Log.error(
                            "key_record_invalid",
                            [("key_id_prefix", String(loggedKeyID.prefix(8))), ("reason", error.reason)])
                        conclude(
                            .failed(
                                EnforcementError(.internalError, "stored public key is invalid"),
                                keyID: loggedKeyID
                            )
                        )
                        return
                    }
                    self.keys.set(key, for: keyID)
                    guard let identity = self.checkAssertion(request, key: key, conclude: conclude) else { return }
                    request.loop.execute { [self] in
                        self.redeemAndAdvance(request, identity: identity, conclude: conclude)
                    }
                }
            }
        }
    }

    /// Key policy checks and the assertion itself: the identity to forward, or nil once
    /// `conclude` has the refusal.
    private func checkAssertion(
        _ request: Request,
        key: CachedKey,
        conclude: @escaping @Sendable (ProtectedRequestOutcome) -> Void
    ) -> IdentityHeaders.Identity? {
        let loggedKeyID = request.keyID
        // The cached counter is at most the stored one, so the local pre-check only refuses what
        // the store would refuse too (a replay, without a round trip). With a challenge the
        // store's one-time challenge is redeemed first, so the pre-check stands aside: otherwise a
        // replay would get `counter_replay` from a gateway whose cache saw the original and
        // `challenge_already_used` from one whose cache is older, and every gateway must give
        // the same answer.
        let lowestRefused =
            request.challenge == nil
            ? CounterWindow.lowestRefused(highest: key.counter, window: request.route.counterWindow) : 0
        if let refusal = AndroidRequestCheck.platformRefusal(key.platform, route: request.route) {
            conclude(.failed(refusal, keyID: loggedKeyID))
            return nil
        }
        if key.platform == .android {
            if !self.androidRequests.reverifyAfter.isEmpty,
                let refusal = self.androidRequests.reverificationRefusal(
                    package: key.appID.value, verifiedAt: key.playIntegrityVerifiedAt, now: self.now())
            {
                conclude(.failed(refusal, keyID: loggedKeyID))
                return nil
            }
            let checked = self.androidRequests.identity(
                keyID: request.keyID, package: key.appID.value, environment: key.environment,
                assertion: request.assertion, clientDataHash: request.clientDataHash, publicKey: key.publicKey,
                lowestRefused: lowestRefused, playIntegrityVerdict: key.playIntegrityVerdict)
            switch checked {
            case .success(let identity): return identity
            case .failure(let error):
                conclude(.failed(error, keyID: loggedKeyID))
                return nil
            }
        }
        if let mismatch = self.environmentMismatch(key.environment) {
            conclude(.failed(EnforcementError(.environmentMismatch, mismatch), keyID: loggedKeyID))
            return nil
        }
        guard self.acceptedAppIDs.contains(key.appID.value) else {
            let error = EnforcementError(
                .appIDMismatch,
                "key's App ID \(key.appID.value) is not accepted by the policy"
            )
            conclude(.failed(error, keyID: loggedKeyID))
            return nil
        }
        let result: AssertionResult
        do throws(VerificationError) {
            result = try self.assertionVerifier.verify(
                assertionObject: request.assertion,
                clientDataHash: request.clientDataHash,
                publicKey: key.publicKey,
                appID: key.appID,
                previousCounter: lowestRefused
            )
        } catch {
            let code = EnforcementError.Code.assertion(error.code)
            if code == .internalError {
                Log.error(
                    "assertion_internal_error",
                    [("key_id_prefix", String(loggedKeyID.prefix(8))), ("reason", error.reason)])
            }
            conclude(.failed(EnforcementError(code, error.reason), keyID: loggedKeyID))
            return nil
        }
        let launch = result.launchValidation
        self.metrics.launchValidation(category: launch.category, bundleVersion: launch.bundleVersion)
        if let attested = key.validationCategory, launch.category != attested {
            let found = launch.category.map(LaunchValidationCategory.name(of:)) ?? "none"
            let error = EnforcementError(
                .validationCategoryMismatch,
                "the assertion's launch validation category (\(found)) differs from the key's attested \(LaunchValidationCategory.name(of: attested)): the binary was re-signed"
            )
            conclude(.failed(error, keyID: loggedKeyID))
            return nil
        }
        let category = launch.category ?? key.validationCategory
        let bundleVersion = launch.bundleVersion ?? key.bundleVersion
        if let refusal = request.route.appValidation?.refusal(
            category: category, bundleVersion: bundleVersion, keyAccessPolicy: key.keyAccessPolicy)
        {
            conclude(.failed(refusal, keyID: loggedKeyID))
            return nil
        }
        return IdentityHeaders.Identity(
            keyID: request.keyID,
            appID: key.appID.value,
            environment: key.environment,
            counter: result.counter,
            validationCategory: category.map(LaunchValidationCategory.name(of:)),
            bundleVersion: bundleVersion,
            keyAccessPolicy: key.keyAccessPolicy
        )
    }

    /// On the loop: the store redeems the route's challenge (when it has one) and advances the
    /// key's counter.
    private func redeemAndAdvance(
        _ request: Request,
        identity: IdentityHeaders.Identity,
        conclude: @escaping @Sendable (ProtectedRequestOutcome) -> Void
    ) {
        request.loop.assertInLoop()
        let loggedKeyID = request.keyID
        guard let challenge = request.challenge else {
            self.advanceCounter(request, identity: identity, conclude: conclude)
            return
        }
        self.challenges.redeem(challenge) { [self] redeemed in
            switch redeemed {
            case .failure(let error):
                conclude(.storeFailed(error, operation: "redeem_challenge", keyID: loggedKeyID))
            case .success(false):
                conclude(.failed(.challengeAlreadyUsed(), keyID: loggedKeyID))
            case .success(true):
                self.advanceCounter(request, identity: identity, conclude: conclude)
            }
        }
    }

    private func advanceCounter(
        _ request: Request,
        identity: IdentityHeaders.Identity,
        conclude: @escaping @Sendable (ProtectedRequestOutcome) -> Void
    ) {
        let keyID = request.keyID
        let loggedKeyID = request.keyID
        let counter = identity.counter
        let window = request.route.counterWindow
        let now = self.now()
        // The key's fraud-risk fields come back with the counter: no round trip of their own.
        let route = request.route
        let callStart = request.storeCall == nil ? 0 : SystemCalls.monotonicNanoseconds()
        // The route's per-key limits are charged in the counter's own script: still one round trip.
        self.store.advanceCounterReadingRisk(
            keyID: keyID, to: counter, window: window, lazyRefreshAt: self.fraudRisk.lazyRefreshTime(now),
            limits: route.keyLimits.map { KeyLimitCharge(route: route.name, limits: $0) }
        ) { [self] readingResult in
            if let recorder = request.storeCall {
                recorder.record(
                    StoreCallSpan(
                        system: self.storeSystem, operation: .advanceCounter,
                        outcome: Self.storeOutcome(readingResult), start: callStart,
                        end: SystemCalls.monotonicNanoseconds()))
            }
            let reading: CounterAdvanceReading
            switch readingResult {
            case .failure(let error):
                conclude(.storeFailed(error, operation: "advance_counter", keyID: loggedKeyID))
                return
            case .success(let read):
                reading = read
            }
            switch reading.advance {
            case .advanced, .acceptedOutOfOrder:
                self.keys.update(keyID) { $0.counter = max($0.counter, counter) }
                let risk = reading.risk
                if risk.refreshDue { self.fraudRisk.wake(keyID: keyID, now: now) }
                conclude(self.judgeRisk(risk, identity: identity, route: request.route, now: now, keyID: loggedKeyID))
            case .notIncreasing(let stored):
                self.keys.update(keyID) { $0.counter = max($0.counter, stored) }
                let reason =
                    window == 0
                    ? "assertion counter \(counter) is not greater than stored counter \(stored)"
                    : "assertion counter \(counter) was already used, or is not within the window of \(window) counters up to the highest stored \(stored)"
                conclude(.failed(EnforcementError(.counterReplay, reason), keyID: loggedKeyID))
            case .limited(let refusal):
                self.metrics.keyLimitRefused(route: route.name, limit: refusal.limit)
                conclude(.failed(.keyLimited(refusal, route: route), keyID: loggedKeyID))
            case .unknownKey:
                self.keys.remove(keyID)
                conclude(.failed(.unknownKey(), keyID: loggedKeyID))
            case .revoked:
                self.keys.remove(keyID)
                conclude(.failed(.revokedKey(), keyID: loggedKeyID))
            }
        }
    }

    /// The store call's outcome as the trace names it.
    private static func storeOutcome(_ result: Result<CounterAdvanceReading, StoreError>) -> StoreCallSpan.Outcome {
        guard case .success(let reading) = result else { return .error }
        switch reading.advance {
        case .advanced: return .advanced
        case .acceptedOutOfOrder: return .acceptedOutOfOrder
        case .notIncreasing: return .notIncreasing
        case .limited: return .limited
        case .unknownKey: return .unknownKey
        case .revoked: return .revoked
        }
    }

    /// nil when a key of `environment` is accepted by the policy, else the reason.
    private func environmentMismatch(_ environment: String) -> String? {
        switch self.environment {
        case .any: return nil
        case .production, .development:
            let wanted = self.environment.rawValue
            return environment == wanted ? nil : "a \(environment) key is not accepted under environment \(wanted)"
        }
    }

    /// Applies the route's mode and `on_store_error` to an outcome; records metrics.
    private func conclude(
        _ outcome: ProtectedRequestOutcome,
        head: HTTPRequestHead,
        route: RoutePolicy,
        judgement: RouteJudgement,
        started: UInt64,
        storeCall: StoreCallSpan? = nil,
        completion: @Sendable (GateDecision) -> Void
    ) {
        // Monotonic nanoseconds: a `Duration` costs 128-bit arithmetic to convert.
        self.metrics.verificationLatency(seconds: Double(SystemCalls.monotonicNanoseconds() &- started) / 1e9)
        if case .storeFailed(let error, let operation, _) = outcome {
            self.storeFailures.report(error, operation: operation, route: route.name)
        }
        var decision = outcome.decision(for: head, route: route, judgement: judgement)
        if let storeCall {
            switch decision {
            case .forward(let head, var info):
                info.storeCall = storeCall
                decision = .forward(head, info)
            case .respond(let response, var info):
                info.storeCall = storeCall
                decision = .respond(response, info)
            }
        }
        let verdict = outcome.verdict
        self.metrics.requestDecided(route: route.name, verdict: verdict)
        if case .verified(let identity) = outcome {
            self.metrics.platformVerified(platform: identity.platform ?? AttestPlatform.ios.rawValue, kind: "request")
        }
        if let arm = judgement.arm {
            self.metrics.rolloutDecided(route: route.name, arm: arm, verdict: verdict)
        }
        completion(decision)
    }
}
