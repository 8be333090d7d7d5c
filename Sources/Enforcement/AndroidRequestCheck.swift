import Foundation
import GateContract
import PolicyModel
import Verification

/// The per-request checks of a request signed by an Android Keystore key, before the store
/// charges its counter (`ProtectedRequestVerifier` calls it for keys whose record says
/// `platform: android`): the route's `platforms`, the package still configured, the signature
/// over `AndroidRequestSignature.signedBytes`, and the counter above what this process saw.
///
/// Pure apart from the ECDSA check; Sendable.
struct AndroidRequestCheck: Sendable {
    /// `android.apps[].package` of the current policy: a key of an app removed from the policy
    /// stops passing.
    let packages: Set<String>
    /// `play_integrity.reverify_after` by package: a key whose last accepted verdict is older
    /// is refused `play_integrity_reverify_required` until it presents a fresh one.
    var reverifyAfter: [String: Duration] = [:]

    /// True when `package` asks for verdicts every `reverify_after` and the key's last one
    /// (nil: never) is older than that at `now`.
    func needsReverification(package: String, verifiedAt: Date?, now: Date) -> Bool {
        guard let interval = self.reverifyAfter[package] else { return false }
        guard let verifiedAt else { return true }
        let seconds = Double(interval.components.seconds)
        return now.timeIntervalSince(verifiedAt) > seconds
    }

    /// The refusal of a key whose verdict is too old, nil when it is fresh enough.
    func reverificationRefusal(package: String, verifiedAt: Date?, now: Date) -> EnforcementError? {
        guard self.needsReverification(package: package, verifiedAt: verifiedAt, now: now),
            let interval = self.reverifyAfter[package]
        else { return nil }
        let age = verifiedAt.map { "\(Int64(now.timeIntervalSince($0))) s ago" } ?? "never"
        return EnforcementError(
            .playIntegrity(.reverifyRequired),
            "this key's last Play Integrity verdict was accepted \(age); \(package) asks for one every \(interval.components.seconds) s: present a fresh token at the attest endpoint with key_id (docs/protocol.md, \"Re-verification\")"
        )
    }

    /// The refusal of a key of `platform` on `route`, nil when the route accepts it.
    static func platformRefusal(_ platform: AttestPlatform, route: RoutePolicy) -> EnforcementError? {
        guard !route.platforms.contains(platform) else { return nil }
        let accepted = route.platforms.map(\.rawValue).joined(separator: ", ")
        switch platform {
        case .android:
            return EnforcementError(
                .platformAndroidRefused, "route \(route.name) accepts \(accepted) keys, not Android keys")
        case .ios:
            return EnforcementError(
                .platformIOSRefused, "route \(route.name) accepts \(accepted) keys, not App Attest keys")
        }
    }

    /// The identity to forward, or the refusal.
    /// - Parameter lowestRefused: counters at or below it are replays this process already saw
    ///   (`CounterWindow.lowestRefused`); the store decides the rest.
    func identity(
        keyID: String, package: String, environment: String, assertion: [UInt8], clientDataHash: [UInt8],
        publicKey: ECPublicKey, lowestRefused: UInt32, playIntegrityVerdict: String? = nil
    ) -> Result<IdentityHeaders.Identity, EnforcementError> {
        guard self.packages.contains(package) else {
            return .failure(
                EnforcementError(
                    .appIDMismatch, "key's Android package \(package) is not accepted by the policy"))
        }
        let signed: AndroidRequestSignature
        do throws(AndroidAttestationError) {
            signed = try AndroidRequestSignature(assertion: assertion)
            try signed.verify(clientDataHash: clientDataHash, publicKey: publicKey)
        } catch {
            return .failure(EnforcementError(.android(error.code), error.reason))
        }
        guard signed.counter > lowestRefused else {
            return .failure(
                EnforcementError(
                    .counterReplay, "counter \(signed.counter) was already used (this gateway saw \(lowestRefused))"))
        }
        var identity = IdentityHeaders.Identity(
            keyID: keyID, appID: package, environment: environment, counter: signed.counter)
        identity.platform = AttestPlatform.android.rawValue
        identity.playIntegrity = playIntegrityVerdict
        return .success(identity)
    }
}
