import AppleClient
import Foundation
import GatewayIO
import KeyStore
import RedisClient
import Verification

/// What the gate does about fraud risk, built once per policy by `AttestGate`:
///
/// - attest time: the attestation's receipt is verified (`ReceiptVerifier`: Apple's root or
///   the policy's `trust_roots`, the key's public key, the App ID). Verified: its risk metric
///   (if any) and not-before start the key's `FraudRiskRefresh` state. Not verified: the key
///   is still registered (the attestation itself verified), the receipt stays as sent, no
///   metric is recorded, and `attest_gateway_attest_receipts_total{outcome=<code>}` and a
///   warning say so (docs/design-notes.md). With a Redis store the state is saved beside the
///   record; with `apple.fraud_risk.enabled` the key joins the due set at its not-before.
/// - request path: `lazyRefreshAt` turns the counter script's due flag on (refreshes on);
///   a due key is woken in the due set (`RedisStore.wakeFraudRisk`, fire and forget).
struct FraudRiskGateHooks: Sendable {
    let receipts: ReceiptVerifier
    /// nil (memory store): no fraud-risk state is kept.
    let store: (any FraudRiskStore)?
    let refreshEnabled: Bool

    /// The verified receipt of `attested`, or nil (logged and counted).
    func verifyReceipt(of attested: AttestedKey, at now: Date, metrics: any GateMetrics) -> Receipt? {
        do throws(VerificationError) {
            let receipt = try self.receipts.verify(
                receipt: attested.receipt, appID: attested.appID, publicKey: attested.publicKey, at: now)
            metrics.attestReceipt(outcome: "verified")
            return receipt
        } catch {
            metrics.attestReceipt(outcome: error.code.rawValue)
            Log.warning(
                "attest_receipt_unverified",
                [
                    ("key_id_prefix", String(EndpointRequests.encodeBase64(attested.keyID).prefix(8))),
                    ("code", error.code.rawValue), ("reason", error.reason),
                ])
            return nil
        }
    }

    /// After the key was created: its first refresh state (and due-set entry when refreshes
    /// are on). A store failure here is logged: the key is registered, and the lazy refresh
    /// (refreshes on) schedules it on its first use.
    func keyCreated(keyID: String, attestedAt: Date, receipt: Receipt?) {
        guard let store = self.store else { return }
        let state = FraudRiskRefresh(attestedAt: attestedAt, receipt: receipt)
        if let metric = state.riskMetric { Log.info("attest_risk_metric", [("metric", String(metric))]) }
        store.saveFraudRisk(keyID: keyID, state: state, receipt: nil, schedule: self.refreshEnabled) { result in
            if case .failure(let error) = result {
                Log.warning(
                    "fraud_risk_schedule_failed",
                    [("key_id_prefix", String(keyID.prefix(8))), ("error", error.description)])
            }
        }
    }

    /// The request's time for the counter script's due check, nil while refreshes are off.
    func lazyRefreshTime(_ now: Date) -> Date? { self.refreshEnabled && self.store != nil ? now : nil }

    /// A used key whose refresh is due: to the front of the due set.
    func wake(keyID: String, now: Date) {
        self.store?.wakeFraudRisk(keyID: keyID, now: now)
    }
}
