import Dispatch
import Foundation
import GateContract
import GatewayIO
import HTTP1
import KeyStore
import PolicyModel
import Verification

/// `POST <endpoints.attest>` with `"platform": "android"` and a `key_id` instead of a
/// certificate chain: an enrolled Android key presents a fresh Play Integrity verdict, as its
/// app's `reverify_after` asks (docs/protocol.md, "Re-verification"), `200 {"key_id",
/// "play_integrity", "verified_at"}`.
///
/// Body: `{"platform": "android", "key_id": "…", "challenge": "…", "play_integrity_token": "…",
/// "signature": "<base64 DER ECDSA P-256 SHA-256 over the UTF-8 challenge, by the key>"}`. The
/// signature proves the caller holds the key; the token is bound to the challenge and the key
/// exactly as at enrollment (`PlayIntegrityBinding`). Steps: parse; check the challenge (no
/// I/O); fetch the key; the signature; the verdict (classic here on the verification queue,
/// standard through Google); redeem the challenge; store the verdict and its time. A refused
/// attempt writes nothing. The completion runs once, on `loop` (or the verification queue for
/// a refusal found there).
final class AndroidPlayIntegrityReverification: Sendable {
    struct Request: Sendable {
        var keyID: String
        var challenge: String
        var token: String?
        var signature: [UInt8]
    }

    private let check: AndroidPlayIntegrityCheck
    private let challenges: IssuedChallenges
    private let store: any AttestStore
    private let storeFailures: StoreFailureReporter
    private let verificationQueue: DispatchQueue
    private let now: @Sendable () -> Date

    init(
        check: AndroidPlayIntegrityCheck, challenges: IssuedChallenges, store: any AttestStore,
        storeFailures: StoreFailureReporter, verificationQueue: DispatchQueue, now: @escaping @Sendable () -> Date
    ) {
        self.check = check
        self.challenges = challenges
        self.store = store
        self.storeFailures = storeFailures
        self.verificationQueue = verificationQueue
        self.now = now
    }

    /// True for an Android body that names a `key_id` (a re-verification, not an enrollment).
    static func isReverification(_ body: [UInt8]) -> Bool {
        guard let object = try? EndpointRequests.jsonObject(body, maxBytes: EndpointRequests.maxEndpointBodyBytes)
        else { return false }
        return object["key_id"] != nil
    }

    static func parse(_ body: [UInt8]) throws(EnforcementError) -> Request {
        let object = try EndpointRequests.jsonObject(body, maxBytes: EndpointRequests.maxEndpointBodyBytes)
        guard object["certificate_chain"] == nil else {
            throw EnforcementError(
                .malformedRequest, "send key_id (re-verification) or certificate_chain (enrollment), not both")
        }
        guard let keyID = object["key_id"] as? String, let bytes = EndpointRequests.decodeBase64(keyID),
            bytes.count == 32
        else {
            throw EnforcementError(.malformedRequest, "key_id must be the standard base64 of the 32-byte key ID")
        }
        guard let challenge = object["challenge"] as? String, !challenge.isEmpty else {
            throw EnforcementError(.malformedRequest, "challenge must be a non-empty string")
        }
        guard let signatureText = object["signature"] as? String,
            let signature = EndpointRequests.decodeBase64(signatureText), (8...72).contains(signature.count)
        else {
            throw EnforcementError(
                .malformedRequest,
                "signature must be the standard base64 of a DER ECDSA signature over the challenge by the enrolled key")
        }
        var token: String?
        if let value = object["play_integrity_token"], !(value is NSNull) {
            guard let text = value as? String, !text.isEmpty,
                text.utf8.count <= AndroidEnrollmentVerifier.maximumPlayIntegrityTokenBytes
            else {
                throw EnforcementError(
                    .malformedRequest,
                    "play_integrity_token must be a non-empty string of at most \(AndroidEnrollmentVerifier.maximumPlayIntegrityTokenBytes) bytes"
                )
            }
            token = text
        }
        return Request(keyID: keyID, challenge: challenge, token: token, signature: signature)
    }

    func respond(
        body: [UInt8], loop: EventLoop, finish: @escaping @Sendable (Result<KeyRecord, EnforcementError>) -> Void
    ) {
        guard
            let (request, checked) = self.challenges.admit(
                body, parse: Self.parse, challenge: \.challenge, finish: finish)
        else { return }
        self.store.fetchKey(keyID: request.keyID) { [self] result in
            switch result {
            case .failure(let error):
                self.storeFailures.report(error, operation: "fetch_key", route: AttestGate.RouteLabel.attest)
                finish(.failure(.stateUnavailable()))
            case .success(nil):
                finish(.failure(.unknownKey()))
            case .success(let record?):
                self.verify(record, request: request, challenge: checked, loop: loop, finish: finish)
            }
        }
    }

    private func verify(
        _ record: KeyRecord, request: Request, challenge: ChallengeTokens.Checked, loop: EventLoop,
        finish: @escaping @Sendable (Result<KeyRecord, EnforcementError>) -> Void
    ) {
        guard record.status == .active else {
            finish(.failure(.revokedKey()))
            return
        }
        guard record.platform == KeyRecord.androidPlatform, let app = self.check.apps[record.appID] else {
            finish(
                .failure(
                    EnforcementError(
                        .malformedRequest, "this key's app asks no Play Integrity verdict: nothing to re-verify")))
            return
        }
        guard let publicKey = try? ECPublicKey(x962: record.publicKey) else {
            finish(.failure(EnforcementError(.internalError, "stored public key is invalid")))
            return
        }
        guard publicKey.isValidSignature(request.signature, for: Array(request.challenge.utf8)) else {
            finish(
                .failure(
                    EnforcementError(
                        .android(.requestSignatureInvalid),
                        "signature is not the enrolled key's signature over this challenge")))
            return
        }
        let spki = AndroidPlayIntegrityCheck.subjectPublicKeyInfo(x962: record.publicKey)
        let store: @Sendable (Result<String, EnforcementError>) -> Void = { [self] outcome in
            switch outcome {
            case .failure(let error): finish(.failure(error))
            case .success(let verdict):
                loop.execute { [self] in
                    self.record(verdict, for: record, challenge: challenge, finish: finish)
                }
            }
        }
        if case .classic = app.decoding {
            self.verificationQueue.async { [self] in
                let outcome = AndroidPlayIntegrityCheck.checkClassic(
                    app, token: request.token, challenge: request.challenge, attestedKeySPKI: spki, at: self.now())
                store(outcome ?? .failure(EnforcementError(.internalError, "classic check of a standard app")))
            }
        } else {
            AndroidPlayIntegrityCheck.checkStandard(
                app, token: request.token, challenge: request.challenge, attestedKeySPKI: spki, now: self.now,
                loop: loop,
                completion: store)
        }
    }

    /// On the loop: redeem the challenge, then store the verdict.
    private func record(
        _ verdict: String, for record: KeyRecord, challenge: ChallengeTokens.Checked,
        finish: @escaping @Sendable (Result<KeyRecord, EnforcementError>) -> Void
    ) {
        self.challenges.redeem(challenge, storeFailures: self.storeFailures, finish: finish) { [self] in
            let time = self.now()
            self.store.recordPlayIntegrityVerdict(keyID: record.keyID, verdict: verdict, at: time) { [self] stored in
                switch stored {
                case .failure(let error):
                    self.storeFailures.report(
                        error, operation: "record_play_integrity", route: AttestGate.RouteLabel.attest)
                    finish(.failure(.stateUnavailable()))
                case .success(false):
                    finish(.failure(.revokedKey()))
                case .success(true):
                    var updated = record
                    updated.playIntegrityVerdict = verdict
                    updated.playIntegrityVerifiedAt = time
                    finish(.success(updated))
                }
            }
        }
    }
}
