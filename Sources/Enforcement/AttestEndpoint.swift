import Dispatch
import Foundation
import GateContract
import GatewayIO
import HTTP1
import KeyStore
import PolicyModel
import Verification

/// `POST <endpoints.attest>` (default `/app-attest/attest`): registers a key from an App Attest
/// attestation over a challenge this fleet issued, `201 {"key_id", "environment", "app_id"}`
/// plus the launch validation when the device wrote one.
///
/// Steps: parse the JSON body; check the challenge's tag and expiry (no I/O); verify the
/// attestation on the verification queue; redeem the challenge; create the key. The challenge
/// is redeemed only once the attestation verified, so a failed attempt writes nothing.
/// Immutable; called on a connection's loop. The chain check runs on the verification queue;
/// the store's writes go out from `loop` again, on its own Redis connection, so the completion
/// runs once, on `loop`, or on the verification queue for a refusal found there.
final class AttestEndpoint: Sendable {
    private let path: String
    /// nil when the policy names no App ID (a passthrough-only policy): every attestation is
    /// refused.
    private let verifier: AttestationVerifier?
    private let challenges: IssuedChallenges
    private let store: any AttestStore
    private let fraudRisk: FraudRiskGateHooks
    private let metrics: any GateMetrics
    private let storeFailures: StoreFailureReporter
    private let verificationQueue: DispatchQueue
    private let now: @Sendable () -> Date
    /// Counts each registered key in the fleet's per-app, per-minute attestation rate.
    private let fleetRate: FleetAttestationRate
    /// Bodies with `"platform": "android"` go there; nil when the policy has no `android:`.
    private let android: AndroidEnrollment?

    /// - Parameter verificationQueue: the certificate chain check (~1 ms) runs there, never on
    ///   a connection queue.
    init(
        path: String,
        verifier: AttestationVerifier?,
        challenges: IssuedChallenges,
        store: any AttestStore,
        fraudRisk: FraudRiskGateHooks,
        metrics: any GateMetrics,
        storeFailures: StoreFailureReporter,
        verificationQueue: DispatchQueue,
        now: @escaping @Sendable () -> Date,
        attestationRateAlert: Int? = nil,
        android: AndroidEnrollmentVerifier? = nil
    ) {
        self.path = path
        self.verifier = verifier
        self.challenges = challenges
        self.store = store
        self.fraudRisk = fraudRisk
        self.metrics = metrics
        self.storeFailures = storeFailures
        self.verificationQueue = verificationQueue
        self.now = now
        let fleetRate = FleetAttestationRate(store: store, threshold: attestationRateAlert, metrics: metrics, now: now)
        self.fleetRate = fleetRate
        self.android = android.map {
            AndroidEnrollment(
                verifier: $0, challenges: challenges, store: store, metrics: metrics, storeFailures: storeFailures,
                verificationQueue: verificationQueue, now: now, fleetRate: fleetRate)
        }
    }

    func respond(
        to head: HTTPRequestHead, body: [UInt8]?, loop: EventLoop,
        completion: @escaping @Sendable (GateDecision) -> Void
    ) {
        let finish: @Sendable (Result<AttestedKey, EnforcementError>) -> Void = { [self] result in
            completion(self.decision(result))
        }
        guard head.method == "POST" else {
            finish(.failure(.methodNotAllowed(endpoint: self.path)))
            return
        }
        if let android = self.android, AndroidEnrollmentVerifier.isAndroidRequest(body ?? []) {
            android.respond(body: body ?? [], loop: loop, completion: completion)
            return
        }
        guard
            let (request, checked) = self.challenges.admit(
                body ?? [], parse: EndpointRequests.parseAttestRequest, challenge: \.challenge, finish: finish)
        else { return }
        self.verificationQueue.async { [self] in
            self.verify(request, challenge: checked, loop: loop, finish: finish)
        }
    }

    /// The response to an attestation that registered a key or failed; counts it.
    private func decision(_ result: Result<AttestedKey, EnforcementError>) -> GateDecision {
        switch result {
        case .success(let attested):
            self.metrics.attestation(result: AttestVerdict.verified.rawValue)
            self.metrics.requestDecided(route: AttestGate.RouteLabel.attest, verdict: .verified)
            self.metrics.platformVerified(platform: "ios", kind: "enrollment")
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
            if let policy = attested.keyAccessPolicy {
                fields.append(("key_access_policy", JSONText.quote(policy.rawValue)))
            }
            return .respond(
                .attestJSON(status: 201, fields), GateLogInfo(verdict: AttestVerdict.verified, keyID: keyID))
        case .failure(let error):
            return error.attestRefusal(metrics: self.metrics)
        }
    }

    private func verify(
        _ request: EndpointRequests.AttestRequest,
        challenge: ChallengeTokens.Checked,
        loop: EventLoop,
        finish: @escaping @Sendable (Result<AttestedKey, EnforcementError>) -> Void
    ) {
        let attestedAt = self.now()
        guard let verifier = self.verifier else {
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
        // On the verification queue, like the attestation's own chain check.
        let receipt = self.fraudRisk.verifyReceipt(of: attested, at: attestedAt, metrics: self.metrics)
        let record = KeyRecord(
            keyID: EndpointRequests.encodeBase64(attested.keyID),
            publicKey: attested.publicKey,
            counter: 0,
            appID: attested.appID,
            environment: attested.environment.rawValue,
            receipt: attested.receipt,
            attestedAt: attestedAt,
            validationCategory: attested.launchValidation.category,
            bundleVersion: attested.launchValidation.bundleVersion,
            keyAccessPolicy: attested.keyAccessPolicy?.rawValue
        )
        loop.execute { [self] in
            self.register(record, challenge: challenge, attested: attested, receipt: receipt, finish: finish)
        }
    }

    /// On the connection's loop: redeem the challenge, then create the key.
    private func register(
        _ record: KeyRecord,
        challenge: ChallengeTokens.Checked,
        attested: AttestedKey,
        receipt: Receipt?,
        finish: @escaping @Sendable (Result<AttestedKey, EnforcementError>) -> Void
    ) {
        self.challenges.redeem(challenge, storeFailures: self.storeFailures, finish: finish) { [self] in
            self.createKey(record, attested: attested, receipt: receipt, finish: finish)
        }
    }

    private func createKey(
        _ record: KeyRecord,
        attested: AttestedKey,
        receipt: Receipt?,
        finish: @escaping @Sendable (Result<AttestedKey, EnforcementError>) -> Void
    ) {
        self.store.createKey(record, storeFailures: self.storeFailures, finish: finish) { [self] in
            self.fraudRisk.keyCreated(keyID: record.keyID, attestedAt: record.attestedAt, receipt: receipt)
            finish(.success(attested))
            self.fleetRate.attested(appID: record.appID)
        }
    }
}
