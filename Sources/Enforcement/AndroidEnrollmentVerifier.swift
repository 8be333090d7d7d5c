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
/// An app with `play_integrity:` also needs a Play Integrity token bound to
/// `PlayIntegrityBinding.classicNonce(challenge, SPKI of the attested leaf key)` (the classic
/// `nonce`, or the standard `requestHash`: the same value), checked after the chain (so the app
/// and the key are known): a classic token here with the caller's clock; a standard token is
/// left to `AndroidEnrollment`, which asks Google (`Verified.standard`).
final class AndroidEnrollmentVerifier: Sendable {
    /// The parsed body.
    struct Request: Sendable {
        var challenge: String
        /// DER certificates, leaf first.
        var chain: [[UInt8]]
        /// `play_integrity_token`: a Play Integrity token (classic: a compact JWE; standard:
        /// Google's opaque token), when sent.
        var playIntegrityToken: String? = nil
    }

    /// A chain that passed, and what is left to check.
    struct Verified: Sendable {
        var record: KeyRecord
        /// The app's tokens are standard: Google decodes `request.playIntegrityToken` before
        /// the key is created (`AndroidPlayIntegrityCheck.checkStandard`).
        var standard: AndroidPlayIntegrityCheck.App?
        /// The attested key's SPKI, for the standard binding.
        var attestedKeySPKI: [UInt8]
    }

    private let chainVerifier: AndroidAttestationChainVerifier
    private let requirements: AndroidKeyRequirements
    /// The apps whose `play_integrity:` asks for a verdict at enrollment.
    let playIntegrity: AndroidPlayIntegrityCheck
    /// The revocation status list in use (kept current by `AndroidRevocationFetcher`); nil
    /// with `revocation: off`.
    let revocation: AndroidRevocationCurrent?

    /// - Parameters:
    ///   - policy: the `android:` block (apps, extra anchors, revocation).
    ///   - revocation: the list `serve` keeps current for `policy.revocation`. Without one
    ///     (a tool, a test) and with `policy.revocation` set, a holder of no list: every
    ///     enrollment is refused as stale unless `on_stale: allow` (fail closed).
    ///   - decoders: the standard decoders (outbound client to Google) the gateway keeps
    ///     across reloads; nil = standard tokens cannot be decoded (refused, or unverified).
    init(
        policy: AndroidPolicy, revocation: AndroidRevocationCurrent? = nil,
        decoders: PlayIntegrityStandardDecoders? = nil
    ) throws(AndroidAttestationError) {
        self.revocation = policy.revocation.map { revocation ?? AndroidRevocationCurrent(settings: $0) }
        let apps = policy.apps.map(Self.requirement)
        self.requirements = AndroidKeyRequirements(apps: apps)
        self.playIntegrity = AndroidPlayIntegrityCheck(policy: policy, decoders: decoders)
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

    /// The verified key record, or the refusal, for apps whose verdict (if any) is checked
    /// here; an app with standard tokens is refused `play_integrity_unavailable` (its verdict
    /// needs Google: `verifyEnrollment` and `AndroidEnrollment`).
    func verify(_ request: Request, at time: Date) -> Result<KeyRecord, EnforcementError> {
        self.verifyEnrollment(request, at: time).flatMap { verified in
            guard verified.standard == nil else {
                return .failure(
                    EnforcementError(
                        .playIntegrity(.unavailable),
                        "a standard Play Integrity token needs Google's decodeIntegrityToken"))
            }
            return .success(verified.record)
        }
    }

    /// The chain, the app's requirements and a classic verdict. Pure apart from `now`; runs on
    /// the verification queue (the chain check is ~1 ms).
    func verifyEnrollment(_ request: Request, at time: Date) -> Result<Verified, EnforcementError> {
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
        let spki = result.leafPublicKey.subjectPublicKeyInfo
        var record = KeyRecord(
            keyID: Self.keyID(subjectPublicKeyInfo: spki),
            publicKey: point,
            counter: 0,
            appID: app.packageName,
            // What vouches for the key: Google's roots, or an extra anchor (test roots).
            environment: result.isGoogleRoot ? "google" : "extra_anchor",
            receipt: [],
            attestedAt: time)
        record.platform = KeyRecord.androidPlatform
        var standard: AndroidPlayIntegrityCheck.App?
        if let integrity = self.playIntegrity.apps[app.packageName] {
            if let classic = AndroidPlayIntegrityCheck.checkClassic(
                integrity, token: request.playIntegrityToken, challenge: request.challenge, attestedKeySPKI: spki,
                at: time)
            {
                switch classic {
                case .failure(let error): return .failure(error)
                case .success(let verdict):
                    record.playIntegrityVerdict = verdict
                    record.playIntegrityVerifiedAt = time
                }
            } else {
                guard request.playIntegrityToken != nil else { return .failure(AndroidPlayIntegrityCheck.missing()) }
                standard = integrity
            }
        }
        return .success(Verified(record: record, standard: standard, attestedKeySPKI: spki))
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
