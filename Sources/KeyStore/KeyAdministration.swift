package import AppleClient
package import Foundation
import GatewayIO
package import RedisClient
import Synchronization

/// The `keys show` / `keys revoke` operations: blocking calls for the CLI, outside the
/// request path (never call them on a gateway queue).
package enum KeyAdministration {
    /// The key ID as the gateway stores it: standard base64 with padding of the decoded bytes.
    /// Accepts standard or URL-safe base64, with or without padding. Nil when not base64.
    package static func canonicalKeyID(_ text: String) -> String? {
        var normalized = text.trimmingCharacters(in: .whitespaces)
            .replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while normalized.hasSuffix("=") { normalized.removeLast() }
        switch normalized.count % 4 {
        case 0: break
        case 2: normalized += "=="
        case 3: normalized += "="
        default: return nil
        }
        guard !normalized.isEmpty, let data = Data(base64Encoded: normalized) else { return nil }
        return data.base64EncodedString()
    }

    /// Fetches a key record, waiting at most `timeout`.
    package static func fetch(_ store: any AttestStore, keyID: String, timeout: Duration) throws(StoreError)
        -> KeyRecord?
    {
        try Self.wait(timeout: timeout) { done in store.fetchKey(keyID: keyID, completion: done) }
    }

    /// Revokes a key; false when no such key. Waits at most `timeout`.
    package static func revoke(_ store: any AttestStore, keyID: String, timeout: Duration) throws(StoreError) -> Bool {
        try Self.wait(timeout: timeout) { done in store.revokeKey(keyID: keyID, completion: done) }
    }

    /// Key IDs starting with `prefix` on every node (`RedisStore.scanKeyIDs`), sorted.
    package static func scan(_ store: RedisStore, prefix: String, timeout: Duration) throws(StoreError) -> [String] {
        try Self.wait(timeout: timeout) { done in store.scanKeyIDs(prefix: prefix, completion: done) }
    }

    /// One JSON object: key_id, app_id, environment, counter, status, attested_at (RFC 3339),
    /// public_key (base64 of the 65-byte point), receipt_bytes (the receipt's size), and
    /// validation_category (integer) / bundle_version when the attestation carried them, and
    /// key_access_policy (macOS 27) when its certificate did.
    /// The key's fraud-risk refresh state (nil: none saved: refreshes off and the key attested
    /// before fraud-risk refreshes existed, or the memory store). Waits at most `timeout`.
    package static func fetchFraudRisk(_ store: RedisStore, keyID: String, timeout: Duration) throws(StoreError)
        -> FraudRiskRefresh?
    {
        try Self.wait(timeout: timeout) { done in store.fetchFraudRisk(keyID: keyID, completion: done) }
    }

    /// `json(record)` plus the fraud-risk fields: `risk_metric` and `risk_metric_time` when
    /// known, and `fraud_risk` (the refresh state) when one was saved.
    package static func json(_ record: KeyRecord, fraudRisk: FraudRiskRefresh?) -> String {
        guard let state = fraudRisk else { return Self.json(record) }
        var fields: [(String, String)] = []
        if let metric = state.riskMetric {
            fields.append(("risk_metric", String(metric)))
            if let time = state.riskMetricTime {
                fields.append(("risk_metric_time", JSONText.quote(Self.rfc3339(time))))
            }
        }
        var refresh: [(String, String)] = [
            ("status", JSONText.quote(state.status.rawValue)),
            ("failures", String(state.failures)),
        ]
        let dates: [(String, Date?)] = [
            ("next_attempt", state.nextAttempt), ("last_attempt", state.lastAttempt),
            ("receipt_not_before", state.receiptNotBefore), ("receipt_expiration", state.receiptExpiration),
        ]
        for (name, date) in dates {
            if let date { refresh.append((name, JSONText.quote(Self.rfc3339(date)))) }
        }
        if let outcome = state.lastOutcome { refresh.append(("last_outcome", JSONText.quote(outcome))) }
        fields.append(("fraud_risk", JSONText.object(refresh)))
        return JSONText.object(Self.fields(record) + fields)
    }

    package static func json(_ record: KeyRecord) -> String { JSONText.object(Self.fields(record)) }

    private static func fields(_ record: KeyRecord) -> [(String, String)] {
        var fields = [
            ("key_id", JSONText.quote(record.keyID)),
            ("app_id", JSONText.quote(record.appID)),
            ("environment", JSONText.quote(record.environment)),
            ("counter", String(record.counter)),
            ("status", JSONText.quote(record.status.rawValue)),
            ("attested_at", JSONText.quote(Self.rfc3339(record.attestedAt))),
            ("public_key", JSONText.quote(Data(record.publicKey).base64EncodedString())),
            ("receipt_bytes", String(record.receipt.count)),
        ]
        // Launch validation at attestation (iOS 27+), when the device wrote it.
        if let category = record.validationCategory {
            fields.append(("validation_category", String(category)))
        }
        if let version = record.bundleVersion {
            fields.append(("bundle_version", JSONText.quote(version)))
        }
        if let policy = record.keyAccessPolicy {
            fields.append(("key_access_policy", JSONText.quote(policy)))
        }
        // Android keys only: App Attest records keep their shape.
        if let platform = record.platform {
            fields.append(("platform", JSONText.quote(platform)))
        }
        // Android keys of apps with `play_integrity:`: the verdict and when it was accepted.
        if let verdict = record.playIntegrityVerdict {
            fields.append(("play_integrity", JSONText.quote(verdict)))
            if let verifiedAt = record.playIntegrityVerifiedAt {
                fields.append(("play_integrity_verified_at", JSONText.quote(Self.rfc3339(verifiedAt))))
            }
        }
        return fields
    }

    package static func rfc3339(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02dZ",
            parts.tm_year + 1900,
            parts.tm_mon + 1,
            parts.tm_mday,
            parts.tm_hour,
            parts.tm_min,
            parts.tm_sec
        )
    }

    static func wait<T: Sendable>(
        timeout: Duration,
        _ start: (@escaping @Sendable (Result<T, StoreError>) -> Void) -> Void
    ) throws(StoreError) -> T {
        let box = Mutex<Result<T, StoreError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        start { result in
            box.withLock { $0 = result }
            done.signal()
        }
        guard done.wait(timeout: .now() + .nanoseconds(Int(clamping: timeout.nanoseconds))) == .success,
            let result = box.withLock({ $0 })
        else {
            throw StoreError(.timeout, "no answer from the store within \(timeout.milliseconds) ms")
        }
        return try result.get()
    }
}
