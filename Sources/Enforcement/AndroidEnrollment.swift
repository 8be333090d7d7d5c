import Dispatch
import Foundation
import GateContract
import GatewayIO
import HTTP1
import KeyStore
import PolicyModel
import Verification

/// `POST <endpoints.attest>` with `"platform": "android"`: enrolls an Android Keystore key
/// from its Key Attestation certificate chain over a challenge this fleet issued, `201
/// {"key_id", "platform", "app_id"}`.
///
/// The same endpoint as App Attest: one URL for the app to configure, and the endpoint's
/// per-address limit, body cap, challenge rules and fleet attestation rate apply to both
/// platforms without a second copy (docs/design-notes.md "Android enrollment"). `AttestEndpoint`
/// hands a body that names the platform here. Steps mirror iOS: parse; check the challenge
/// (tag, expiry; no I/O); verify the chain and the policy's requirements on the verification
/// queue; redeem the challenge; create the key. A failed attempt writes nothing. The
/// completion runs once, on `loop`, or on the verification queue for a refusal found there.
final class AndroidEnrollment: Sendable {
    private let verifier: AndroidEnrollmentVerifier
    private let challenges: IssuedChallenges
    private let store: any AttestStore
    private let metrics: any GateMetrics
    private let storeFailures: StoreFailureReporter
    private let verificationQueue: DispatchQueue
    private let now: @Sendable () -> Date
    private let fleetRate: FleetAttestationRate

    init(
        verifier: AndroidEnrollmentVerifier, challenges: IssuedChallenges, store: any AttestStore,
        metrics: any GateMetrics, storeFailures: StoreFailureReporter, verificationQueue: DispatchQueue,
        now: @escaping @Sendable () -> Date, fleetRate: FleetAttestationRate
    ) {
        self.verifier = verifier
        self.challenges = challenges
        self.store = store
        self.metrics = metrics
        self.storeFailures = storeFailures
        self.verificationQueue = verificationQueue
        self.now = now
        self.fleetRate = fleetRate
    }

    func respond(body: [UInt8], loop: EventLoop, completion: @escaping @Sendable (GateDecision) -> Void) {
        let finish: @Sendable (Result<KeyRecord, EnforcementError>) -> Void = { [self] result in
            completion(self.decision(result))
        }
        let request: AndroidEnrollmentVerifier.Request
        do throws(EnforcementError) {
            request = try AndroidEnrollmentVerifier.parse(body)
        } catch {
            finish(.failure(error))
            return
        }
        let checked: ChallengeTokens.Checked
        switch self.challenges.check(request.challenge) {
        case .failure(let error):
            finish(.failure(error))
            return
        case .success(let value):
            checked = value
        }
        self.verificationQueue.async { [self] in
            switch self.verifier.verify(request, at: self.now()) {
            case .failure(let error):
                finish(.failure(error))
            case .success(let record):
                loop.execute { [self] in self.register(record, challenge: checked, finish: finish) }
            }
        }
    }

    private func decision(_ result: Result<KeyRecord, EnforcementError>) -> GateDecision {
        switch result {
        case .success(let record):
            self.metrics.attestation(result: AttestVerdict.verified.rawValue)
            self.metrics.requestDecided(route: AttestGate.RouteLabel.attest, verdict: .verified)
            self.metrics.platformVerified(platform: KeyRecord.androidPlatform, kind: "enrollment")
            let body = JSONText.object([
                ("key_id", JSONText.quote(record.keyID)),
                ("platform", JSONText.quote(KeyRecord.androidPlatform)),
                ("app_id", JSONText.quote(record.appID)),
                ("environment", JSONText.quote(record.environment)),
            ])
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/json")
            let response = LocalResponse(status: 201, headers: headers, body: Array(body.utf8))
            var info = GateLogInfo(verdict: AttestVerdict.verified, keyID: record.keyID)
            info.platform = KeyRecord.androidPlatform
            return .respond(response, info)
        case .failure(let error):
            self.metrics.attestation(result: error.code.rawValue)
            self.metrics.requestDecided(route: AttestGate.RouteLabel.attest, verdict: error.verdict)
            return .respond(error.response, GateLogInfo(verdict: error.verdict))
        }
    }

    /// On the connection's loop: redeem the challenge, then create the key.
    private func register(
        _ record: KeyRecord, challenge: ChallengeTokens.Checked,
        finish: @escaping @Sendable (Result<KeyRecord, EnforcementError>) -> Void
    ) {
        self.challenges.redeem(challenge) { [self] redeemed in
            switch redeemed {
            case .failure(let error):
                self.storeFailures.report(error, operation: "redeem_challenge", route: AttestGate.RouteLabel.attest)
                finish(.failure(.stateUnavailable()))
            case .success(false):
                finish(.failure(.challengeAlreadyUsed()))
            case .success(true):
                self.store.createKey(record) { [self] created in
                    switch created {
                    case .failure(let error):
                        self.storeFailures.report(error, operation: "create_key", route: AttestGate.RouteLabel.attest)
                        finish(.failure(.stateUnavailable()))
                    case .success(.alreadyExists):
                        finish(.failure(EnforcementError(.keyAlreadyAttested, "this key ID is already attested")))
                    case .success(.created):
                        finish(.success(record))
                        self.fleetRate.attested(appID: record.appID)
                    }
                }
            }
        }
    }
}
