package import Foundation
import GatewayIO
package import RedisClient

/// `debug-tokens create | list | revoke`: blocking calls for the CLI, outside the request
/// path (never call them on a gateway queue).
package enum DebugTokenAdministration {
    /// Longest lifetime of a debug token: they are for simulators and CI, not for shipping.
    package static let maximumLifetime: TimeInterval = 366 * 86_400

    /// Creates a token; nil when the name is taken. Returns the secret (shown once) and its record.
    package static func create(
        _ store: any AttestStore, name: String, lifetime: TimeInterval, now: Date = Date(), timeout: Duration
    ) throws(StoreError) -> (token: String, record: DebugTokenRecord)? {
        let token = DebugTokens.generate()
        let record = DebugTokenRecord(name: name, createdAt: now, expiresAt: now.addingTimeInterval(lifetime))
        let created = try KeyAdministration.wait(timeout: timeout) { done in
            store.createDebugToken(record, digest: DebugTokens.digest(token), completion: done)
        }
        return created ? (token, record) : nil
    }

    package static func list(_ store: any AttestStore, timeout: Duration) throws(StoreError) -> [DebugTokenRecord] {
        try KeyAdministration.wait(timeout: timeout) { done in store.listDebugTokens(completion: done) }
    }

    package static func revoke(_ store: any AttestStore, name: String, timeout: Duration) throws(StoreError) -> Bool {
        try KeyAdministration.wait(timeout: timeout) { done in store.revokeDebugToken(name: name, completion: done) }
    }

    /// `{"name","created_at","expires_at","last_used","expired"}` (times RFC 3339, `last_used` null
    /// until first use). Never the token.
    package static func json(_ record: DebugTokenRecord, now: Date = Date()) -> String {
        JSONText.object([
            ("name", JSONText.quote(record.name)),
            ("created_at", JSONText.quote(KeyAdministration.rfc3339(record.createdAt))),
            ("expires_at", JSONText.quote(KeyAdministration.rfc3339(record.expiresAt))),
            ("last_used", record.lastUsedAt.map { JSONText.quote(KeyAdministration.rfc3339($0)) } ?? "null"),
            ("expired", record.isExpired(at: now) ? "true" : "false"),
        ])
    }

    /// `30d`, `12h`, `90m`, `3600s` or whole seconds; nil for anything else or beyond `maximumLifetime`.
    package static func lifetime(_ text: String) -> TimeInterval? {
        let units: [(Character, Double)] = [("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
        var digits = Substring(text)
        var scale = 1.0
        if let last = text.last, let unit = units.first(where: { $0.0 == last }) {
            digits = text.dropLast()
            scale = unit.1
        }
        guard !digits.isEmpty, digits.count <= 9, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
            let value = Double(digits), value > 0
        else { return nil }
        let seconds = value * scale
        return seconds <= Self.maximumLifetime ? seconds : nil
    }
}
