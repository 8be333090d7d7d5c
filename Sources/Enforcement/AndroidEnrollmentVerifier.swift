import Dispatch
import Foundation
import GateContract
import GatewayIO
import GoogleClient
import KeyStore
import PolicyModel
import Verification

/// The checks of an Android enrollment (`AndroidEnrollment` runs the flow): the body, the
/// chain (`AndroidAttestationChainVerifier`) and the policy's apps (`AndroidKeyRequirements`),
/// giving the key record to store. Immutable, Sendable; built once per policy.
///
/// Key ID: standard base64 of SHA-256 of the leaf certificate's DER SubjectPublicKeyInfo
/// (32 bytes, the shape of an App Attest key ID; the app can compute it from
/// `certificate.publicKey.encoded`). The key record holds the 65-byte X9.62 point, the
/// package as its app ID and `platform: android`.
///
/// An app with `play_integrity:` also needs a classic Play Integrity token whose nonce is
/// `PlayIntegrityBinding.classicNonce(challenge, SPKI of the attested leaf key)`, checked after
/// the chain (so the app and the key are known) with the caller's clock.
final class AndroidEnrollmentVerifier: Sendable {
    /// The parsed body.
    struct Request: Sendable {
        var challenge: String
        /// DER certificates, leaf first.
        var chain: [[UInt8]]
        /// `play_integrity_token`: a classic Play Integrity token (compact JWE), when sent.
        var playIntegrityToken: String? = nil
    }

    private let chainVerifier: AndroidAttestationChainVerifier
    private let requirements: AndroidKeyRequirements
    /// By package: the apps whose `play_integrity:` asks for a verdict at enrollment.
    private let playIntegrity: [String: PlayIntegrityVerifier]
    /// The revocation status list in use (kept current by `AndroidRevocationFetcher`); nil
    /// with `revocation: off`.
    let revocation: AndroidRevocationCurrent?

    /// - Parameters:
    ///   - policy: the `android:` block (apps, extra anchors, revocation).
    ///   - revocation: the list `serve` keeps current for `policy.revocation`. Without one
    ///     (a tool, a test) and with `policy.revocation` set, a holder of no list: every
    ///     enrollment is refused as stale unless `on_stale: allow` (fail closed).
    init(policy: AndroidPolicy, revocation: AndroidRevocationCurrent? = nil) throws(AndroidAttestationError) {
        self.revocation = policy.revocation.map { revocation ?? AndroidRevocationCurrent(settings: $0) }
        let apps = policy.apps.map(Self.requirement)
        self.requirements = AndroidKeyRequirements(apps: apps)
        var playIntegrity: [String: PlayIntegrityVerifier] = [:]
        for app in policy.apps {
            if let configuration = app.playIntegrity { playIntegrity[app.packageName] = configuration.verifier }
        }
        self.playIntegrity = playIntegrity
        self.chainVerifier = try AndroidAttestationChainVerifier(
            additionalTrustAnchorsPEM: policy.trustAnchorsPEM,
            allowsSoftwareAttestation: self.requirements.anyAllowsSoftware)
    }

    static func requirement(_ app: AndroidAppPolicy) -> AndroidAppRequirement {
        let level: AndroidSecurityLevel =
            switch app.securityLevel {
            case .software: .software
            case .trustedEnvironment: .trustedEnvironment
            case .strongbox: .strongBox
            }
        return AndroidAppRequirement(
            packageName: app.packageName, signingDigests: app.signingDigests, minimumSecurityLevel: level,
            requiresLockedBootloader: app.requireLockedBootloader, requiresVerifiedBoot: app.requireVerifiedBoot,
            minimumPatchLevel: app.minimumPatchLevel)
    }

    /// True when the attest body names `"platform": "android"` (a cheap byte scan first: App
    /// Attest bodies pay no second JSON parse).
    static func isAndroidRequest(_ body: [UInt8]) -> Bool {
        guard body.count <= EndpointRequests.maxEndpointBodyBytes,
            Self.contains(body, Array("\"platform\"".utf8)),
            let object = try? EndpointRequests.jsonObject(body, maxBytes: EndpointRequests.maxEndpointBodyBytes)
        else { return false }
        return (object["platform"] as? String) == AttestPlatform.android.rawValue
    }

    /// Longest chain and certificate the body may carry (the verifier bounds them again).
    static let maximumChainLength = AndroidAttestationChainVerifier.maximumChainLength

    /// A Play Integrity token is a compact JWE of at most 16 KiB (`PlayIntegrityJWE`); a longer
    /// field is refused here, before any work.
    static let maximumPlayIntegrityTokenBytes = 16 * 1024

    /// `{"platform": "android", "challenge": "…", "certificate_chain": ["<base64 DER>", …]}`,
    /// with `"play_integrity_token": "<compact JWE>"` for apps with `play_integrity:`.
    static func parse(_ body: [UInt8]) throws(EnforcementError) -> Request {
        let object = try EndpointRequests.jsonObject(body, maxBytes: EndpointRequests.maxEndpointBodyBytes)
        guard let challenge = object["challenge"] as? String, !challenge.isEmpty else {
            throw EnforcementError(.malformedRequest, "challenge must be a non-empty string")
        }
        guard let items = object["certificate_chain"] as? [Any], !items.isEmpty,
            items.count <= Self.maximumChainLength
        else {
            throw EnforcementError(
                .malformedRequest,
                "certificate_chain must be a list of 1 to \(Self.maximumChainLength) base64 DER certificates, leaf first"
            )
        }
        var chain: [[UInt8]] = []
        for (index, item) in items.enumerated() {
            guard let text = item as? String, let der = EndpointRequests.decodeBase64(text), !der.isEmpty else {
                throw EnforcementError(
                    .malformedRequest, "certificate_chain[\(index)] is not the standard base64 of a DER certificate")
            }
            chain.append(der)
        }
        var token: String?
        if let value = object["play_integrity_token"], !(value is NSNull) {
            guard let text = value as? String, !text.isEmpty,
                text.utf8.count <= Self.maximumPlayIntegrityTokenBytes
            else {
                throw EnforcementError(
                    .malformedRequest,
                    "play_integrity_token must be a non-empty string of at most \(Self.maximumPlayIntegrityTokenBytes) bytes (a compact JWE)"
                )
            }
            token = text
        }
        return Request(challenge: challenge, chain: chain, playIntegrityToken: token)
    }

    /// The verified key record, or the refusal. Pure apart from `now`; runs on the
    /// verification queue (the chain check is ~1 ms).
    func verify(_ request: Request, at time: Date) -> Result<KeyRecord, EnforcementError> {
        let result: AndroidAttestationResult
        let app: AndroidAppRequirement
        let revocationList: AndroidRevocationList
        switch self.revocation?.judgeEnrollment(at: time) {
        case nil: revocationList = .empty
        case .list(let list, _): revocationList = list
        case .stale(let why):
            return .failure(
                EnforcementError(
                    .androidRevocationListStale,
                    "\(why): Android enrollments are refused until a list is fetched (docs/operations.md, android.revocation)"
                ))
        }
        do throws(AndroidAttestationError) {
            result = try self.chainVerifier.verify(chain: request.chain, at: time, revocationList: revocationList)
            app = try self.requirements.check(result, challenge: Array(request.challenge.utf8))
        } catch {
            let code = EnforcementError.Code.android(error.code)
            if code == .internalError {
                Log.error("android_attestation_internal_error", [("reason", error.reason)])
            }
            return .failure(EnforcementError(code, error.reason))
        }
        guard let point = result.leafPublicKey.p256Point else {
            return .failure(
                EnforcementError(.android(.keyPropertiesRefused), "the leaf certificate's key is not EC P-256"))
        }
        if let verifier = self.playIntegrity[app.packageName] {
            if case .failure(let error) = Self.checkPlayIntegrity(
                request, verifier: verifier, attestedKeySPKI: result.leafPublicKey.subjectPublicKeyInfo, at: time)
            {
                return .failure(error)
            }
        }
        var record = KeyRecord(
            keyID: Self.keyID(subjectPublicKeyInfo: result.leafPublicKey.subjectPublicKeyInfo),
            publicKey: point,
            counter: 0,
            appID: app.packageName,
            // What vouches for the key: Google's roots, or an extra anchor (test roots).
            environment: result.isGoogleRoot ? "google" : "extra_anchor",
            receipt: [],
            attestedAt: time)
        record.platform = KeyRecord.androidPlatform
        return .success(record)
    }

    /// The app's Play Integrity verdict: present, bound to this challenge and key
    /// (`classicNonce`), fresh by `time`, and accepted by the app's policy. The token is never
    /// echoed: refusals carry the verifier's reason (short printable excerpts of verdict fields).
    static func checkPlayIntegrity(
        _ request: Request, verifier: PlayIntegrityVerifier, attestedKeySPKI spki: [UInt8], at time: Date
    ) -> Result<PlayIntegrityVerdict, EnforcementError> {
        guard let token = request.playIntegrityToken else {
            return .failure(
                EnforcementError(
                    .playIntegrityTokenMissing,
                    "this app requires a Play Integrity verdict at enrollment: send play_integrity_token (docs/protocol.md section 8)"
                ))
        }
        let nonce = PlayIntegrityBinding.classicNonce(challenge: Array(request.challenge.utf8), attestedKeySPKI: spki)
        let nowMillis = Int64((time.timeIntervalSince1970 * 1000).rounded(.down))
        do throws(PlayIntegrityError) {
            return .success(try verifier.verify(token: token, expectedNonce: nonce, nowMillis: nowMillis))
        } catch {
            let code = EnforcementError.Code.playIntegrity(error.code)
            if code == .internalError {
                Log.error("play_integrity_internal_error", [("reason", error.reason)])
            }
            return .failure(EnforcementError(code, error.reason))
        }
    }

    /// Standard base64 of SHA-256 of the DER SubjectPublicKeyInfo.
    static func keyID(subjectPublicKeyInfo: [UInt8]) -> String {
        EndpointRequests.encodeBase64(SHA256.hash(subjectPublicKeyInfo))
    }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        return haystack.withUnsafeBufferPointer { hay in
            for start in 0...(hay.count - needle.count) where hay[start] == needle[0] {
                if needle.indices.allSatisfy({ hay[start + $0] == needle[$0] }) { return true }
            }
            return false
        }
    }
}
