internal import Foundation

/// Google's attestation revocation status list (https://android.googleapis.com/attestation/status):
/// `{"entries": {"<serial hex>": {"status": "REVOKED" | "SUSPENDED", "reason": ..., ...}}}`.
///
/// Pure: the caller fetches the JSON and hands it in; the verifier only looks serials up.
/// Keys are hexadecimal serial numbers even when they contain only digits. Any listed serial
/// is refused, whatever its status: Google's list has no status meaning "still good".
package struct AndroidRevocationList: Sendable {
    /// The live list is a few MiB; this bounds what a bad download can cost.
    package static let maximumSize = 32 * 1024 * 1024

    /// Normalised serial (lowercase hex without leading zeros) to its entry.
    package let entries: [String: AndroidRevocationStatus]

    /// A list with no entries: for callers that have not fetched one yet, said explicitly.
    package static let empty = AndroidRevocationList(entries: [:])

    private init(entries: [String: AndroidRevocationStatus]) {
        self.entries = entries
    }

    package init(json: [UInt8]) throws(AndroidAttestationError) {
        guard json.count <= Self.maximumSize else {
            throw AndroidAttestationError(
                .revocationListMalformed, "status list of \(json.count) bytes exceeds \(Self.maximumSize)")
        }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(json))
        } catch {
            throw AndroidAttestationError(.revocationListMalformed, "status list is not JSON: \(error)")
        }
        guard let top = object as? [String: Any], let listed = top["entries"] as? [String: Any] else {
            throw AndroidAttestationError(.revocationListMalformed, "status list has no \"entries\" object")
        }
        var entries: [String: AndroidRevocationStatus] = [:]
        entries.reserveCapacity(listed.count)
        for (key, value) in listed {
            guard let serial = Self.normalizedSerial(key) else {
                throw AndroidAttestationError(
                    .revocationListMalformed, "status list key \"\(key.prefix(80))\" is not a hex serial number")
            }
            guard let fields = value as? [String: Any], let status = fields["status"] as? String else {
                throw AndroidAttestationError(
                    .revocationListMalformed, "status list entry \(serial) has no \"status\" string")
            }
            entries[serial] = AndroidRevocationStatus(status: status, reason: fields["reason"] as? String)
        }
        self.entries = entries
    }

    /// The entry for a serial given in hex (any case, leading zeros allowed), if listed.
    package func status(serialHex: String) -> AndroidRevocationStatus? {
        guard let serial = Self.normalizedSerial(serialHex) else { return nil }
        return self.entries[serial]
    }

    /// Lowercase, without leading zeros ("0" stays "0"); nil unless hex digits only.
    static func normalizedSerial(_ text: String) -> String? {
        guard !text.isEmpty, text.utf8.count <= 256,
            text.utf8.allSatisfy({ Self.isHexDigit($0) })
        else { return nil }
        let lower = text.lowercased()
        let trimmed = lower.drop { $0 == "0" }
        return trimmed.isEmpty ? "0" : String(trimmed)
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
            UInt8(ascii: "A")...UInt8(ascii: "F"):
            true
        default: false
        }
    }
}
