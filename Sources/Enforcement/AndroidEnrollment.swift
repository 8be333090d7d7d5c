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
    /// Bodies that name a `key_id`: a fresh Play Integrity verdict for an enrolled key.
    private let reverification: AndroidPlayIntegrityReverification

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
        self.reverification = AndroidPlayIntegrityReverification(
            check: verifier.playIntegrity, challenges: challenges, store: store, storeFailures: storeFailures,
            verificationQueue: verificationQueue, now: now)
    }

    func respond(body: [UInt8], loop: EventLoop, completion: @escaping @Sendable (GateDecision) -> Void) {
        if AndroidPlayIntegrityReverification.isReverification(body) {
            self.reverification.respond(body: body, loop: loop) { [self] result in
                completion(self.reverificationDecision(result))
            }
            return
        }
        let finish: @Sendable (Result<KeyRecord, EnforcementError>) -> Void = { [self] result in
            completion(self.decision(result))
        }
        guard
            let (request, checked) = self.challenges.admit(
                body, parse: AndroidEnrollmentVerifier.parse, challenge: \.challenge, finish: finish)
        else { return }
        self.verificationQueue.async { [self] in
            switch self.verifier.verifyEnrollment(request, at: self.now()) {
            case .failure(let error):
                finish(.failure(error))
            case .success(let verified):
                loop.execute { [self] in
                    guard let standard = verified.standard else {
                        self.register(verified.record, challenge: checked, finish: finish)
                        return
                    }
                    // A standard token: Google decodes it, on this loop, before the key exists.
                    AndroidPlayIntegrityCheck.checkStandard(
                        standard, token: request.playIntegrityToken, challenge: request.challenge,
                        attestedKeySPKI: verified.attestedKeySPKI, now: self.now, loop: loop
                    ) { [self] outcome in
                        switch outcome {
                        case .failure(let error):
                            finish(.failure(error))
                        case .success(let verdict):
                            var record = verified.record
                            record.playIntegrityVerdict = verdict
                            record.playIntegrityVerifiedAt = self.now()
                            self.register(record, challenge: checked, finish: finish)
                        }
                    }
                }
            }
        }
    }

    private func decision(_ result: Result<KeyRecord, EnforcementError>) -> GateDecision {
        switch result {
        case .success(let record):
            self.metrics.attestation(result: AttestVerdict.verified.rawValue)
            self.metrics.requestDecided(route: AttestGate.RouteLabel.attest, verdict: .verified)
            self.metrics.platformVerified(platform: KeyRecord.androidPlatform, kind: "enrollment")
            var members = [
                ("key_id", JSONText.quote(record.keyID)),
                ("platform", JSONText.quote(KeyRecord.androidPlatform)),
                ("app_id", JSONText.quote(record.appID)),
                ("environment", JSONText.quote(record.environment)),
            ]
            if let verdict = record.playIntegrityVerdict {
                members.append(("play_integrity", JSONText.quote(verdict)))
            }
            var info = GateLogInfo(verdict: AttestVerdict.verified, keyID: record.keyID)
            info.platform = KeyRecord.androidPlatform
            return .respond(.attestJSON(status: 201, members), info)
        case .failure(let error):
            return error.attestRefusal(metrics: self.metrics)
        }
    }

    /// `200 {"key_id", "platform", "play_integrity", "verified_at"}` or the refusal.
    private func reverificationDecision(_ result: Result<KeyRecord, EnforcementError>) -> GateDecision {
        switch result {
        case .success(let record):
            self.metrics.attestation(result: "play_integrity_reverified")
            self.metrics.requestDecided(route: AttestGate.RouteLabel.attest, verdict: .verified)
            let seconds = Int64(record.playIntegrityVerifiedAt?.timeIntervalSince1970 ?? 0)
            let members = [
                ("key_id", JSONText.quote(record.keyID)),
                ("platform", JSONText.quote(KeyRecord.androidPlatform)),
                ("play_integrity", JSONText.quote(record.playIntegrityVerdict ?? "")),
                ("verified_at", String(seconds)),
            ]
            var info = GateLogInfo(verdict: AttestVerdict.verified, keyID: record.keyID)
            info.platform = KeyRecord.androidPlatform
            return .respond(.attestJSON(status: 200, members), info)
        case .failure(let error):
            return error.attestRefusal(metrics: self.metrics)
        }
    }

    /// On the connection's loop: redeem the challenge, then create the key.
    private func register(
        _ record: KeyRecord, challenge: ChallengeTokens.Checked,
        finish: @escaping @Sendable (Result<KeyRecord, EnforcementError>) -> Void
    ) {
        self.challenges.redeem(challenge, storeFailures: self.storeFailures, finish: finish) { [self] in
            self.store.createKey(record, storeFailures: self.storeFailures, finish: finish) { [self] in
                finish(.success(record))
                self.fleetRate.attested(appID: record.appID)
            }
        }
    }
}
