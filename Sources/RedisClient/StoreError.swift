/// A failure of the store itself (never "not found": that is a value).
package struct StoreError: Error, Hashable, CustomStringConvertible {
    package enum Kind: String, Sendable, Hashable {
        case timeout = "store_timeout"
        case unavailable = "store_unavailable"
        case overloaded = "store_overloaded"
        case protocolError = "store_protocol_error"
    }
    package var kind: Kind
    package var reason: String

    package init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    package var description: String { "StoreError.\(self.kind.rawValue): \(self.reason)" }
}
