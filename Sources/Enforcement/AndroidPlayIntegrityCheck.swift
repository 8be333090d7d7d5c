import Dispatch
import Foundation
import GatewayIO
import KeyStore
import PolicyModel
import Verification

/// The Play Integrity verdict an Android app's policy asks for, at enrollment and at
/// re-verification (`AndroidPlayIntegrityReverification`): a classic token decrypted and
/// verified here, or a standard token decoded by Google (`PlayIntegrityStandardDecoder`), both
/// bound to the challenge and the key (`PlayIntegrityBinding`: the classic `nonce` or the
/// standard `requestHash`, the same value) and held to the same `PlayIntegrityPolicy`.
///
/// The answer is the verdict to store on the key record: `verified`, or `unverified` when
/// Google could not be asked (or the day's budget is spent) and the app says
/// `on_unavailable: allow`.
struct AndroidPlayIntegrityCheck: Sendable {
    enum Decoding: Sendable {
        case classic
        /// nil decoder: the gateway has no outbound client (tools): refused or unverified.
        case standard(PlayIntegrityStandardDecoder?, onUnavailable: PlayIntegrityStandardSettings.OnUnavailable)
    }

    struct App: Sendable {
        let verifier: PlayIntegrityVerifier
        let decoding: Decoding
        let reverifyAfter: Duration?
    }

    /// By package: the apps with `play_integrity:`.
    let apps: [String: App]

    init(policy: AndroidPolicy, decoders: PlayIntegrityStandardDecoders?) {
        var apps: [String: App] = [:]
        for app in policy.apps {
            guard let configuration = app.playIntegrity else { continue }
            let decoding: Decoding
            switch configuration.mode {
            case .classic: decoding = .classic
            case .standard:
                guard let settings = configuration.standard else { continue }
                decoding = .standard(
                    decoders?.decoder(packageName: app.packageName, settings: settings),
                    onUnavailable: settings.onUnavailable)
            }
            apps[app.packageName] = App(
                verifier: configuration.verifier, decoding: decoding, reverifyAfter: configuration.reverifyAfter)
        }
        self.apps = apps
    }

    /// `reverify_after` of each app that sets it.
    var reverifyIntervals: [String: Duration] {
        self.apps.compactMapValues(\.reverifyAfter)
    }

    /// The DER SubjectPublicKeyInfo of a P-256 key given as its 65-byte X9.62 point: what
    /// the binding hashes (the attested leaf's SPKI is this encoding).
    static func subjectPublicKeyInfo(x962 point: [UInt8]) -> [UInt8] {
        let prefix: [UInt8] = [
            0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A, 0x86, 0x48,
            0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
        ]
        return prefix + point
    }

    /// A classic token, synchronously (decryption and ES256: call it off the loops). nil when
    /// the app's tokens are standard (`checkStandard`).
    static func checkClassic(
        _ app: App, token: String?, challenge: String, attestedKeySPKI spki: [UInt8], at time: Date
    ) -> Result<String, EnforcementError>? {
        guard case .classic = app.decoding else { return nil }
        guard let token else { return .failure(Self.missing()) }
        let binding = PlayIntegrityBinding.enrollment(challenge: Array(challenge.utf8), attestedKeySPKI: spki)
        do throws(PlayIntegrityError) {
            _ = try app.verifier.verify(token: token, binding: binding, nowMillis: Self.millis(time))
            return .success(KeyRecord.playIntegrityVerified)
        } catch {
            return .failure(Self.refusal(error))
        }
    }

    /// A standard token, through Google; `completion` runs on `loop`.
    static func checkStandard(
        _ app: App, token: String?, challenge: String, attestedKeySPKI spki: [UInt8],
        now: @escaping @Sendable () -> Date,
        loop: EventLoop, completion: @escaping @Sendable (Result<String, EnforcementError>) -> Void
    ) {
        guard case .standard(let decoder, let onUnavailable) = app.decoding else {
            preconditionFailure("checkStandard on a classic app")
        }
        guard let token else {
            completion(.failure(Self.missing()))
            return
        }
        let unavailable: @Sendable (PlayIntegrityError) -> Void = { error in
            if onUnavailable == .allow {
                Log.warning(
                    "play_integrity_unverified_enrollment",
                    [("package", app.verifier.policy.packageName), ("reason", error.reason)])
                completion(.success(KeyRecord.playIntegrityUnverified))
            } else {
                completion(.failure(Self.refusal(error)))
            }
        }
        guard let decoder else {
            unavailable(PlayIntegrityError(.unavailable, "this gateway has no outbound client to Google"))
            return
        }
        let binding = PlayIntegrityBinding.standardEnrollment(challenge: Array(challenge.utf8), attestedKeySPKI: spki)
        decoder.decode(token: token, on: loop) { result in
            switch result {
            case .failure(let error) where error.code == .unavailable || error.code == .quotaExhausted:
                unavailable(error)
            case .failure(let error):
                completion(.failure(Self.refusal(error)))
            case .success(let payload):
                do throws(PlayIntegrityError) {
                    _ = try app.verifier.verifyStandard(
                        payload: payload, binding: binding, nowMillis: Self.millis(now()))
                    completion(.success(KeyRecord.playIntegrityVerified))
                } catch {
                    completion(.failure(Self.refusal(error)))
                }
            }
        }
    }

    static func millis(_ time: Date) -> Int64 {
        Int64((time.timeIntervalSince1970 * 1000).rounded(.down))
    }

    static func missing() -> EnforcementError {
        EnforcementError(
            .playIntegrityTokenMissing,
            "this app requires a Play Integrity verdict: send play_integrity_token (docs/protocol.md section 8)")
    }

    static func refusal(_ error: PlayIntegrityError) -> EnforcementError {
        let code = EnforcementError.Code.playIntegrity(error.code)
        if code == .internalError {
            Log.error("play_integrity_internal_error", [("reason", error.reason)])
        }
        return EnforcementError(code, error.reason)
    }
}
