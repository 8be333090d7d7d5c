/// SNI name → the `SSL_CTX` holding that name's certificate. Immutable once built; read by
/// the servername callback on any loop's thread. Does not own the contexts
/// (`TLSServerContext` does, and outlives every handshake through its transports).
final class TLSServerNameTable: @unchecked Sendable {
    private var exact: [String: OpaquePointer] = [:]
    /// `*.example.com` is stored under "example.com".
    private var wildcard: [String: OpaquePointer] = [:]

    init() {}

    /// Adds `name` (checked: DNS name, or `*.` + DNS name). Throws on invalid or duplicate names.
    func add(_ name: String, context: OpaquePointer, path: String) throws(TLSConfigurationError) {
        let lowered = Self.normalized(name)
        let isWildcard = lowered.hasPrefix("*.")
        let base = isWildcard ? String(lowered.dropFirst(2)) : lowered
        guard Self.isDNSName(base) else {
            throw TLSConfigurationError(
                .invalidServerName, path: path,
                "server name \"\(name)\" is not a DNS name or a \"*.\" wildcard over one")
        }
        if isWildcard {
            guard self.wildcard[base] == nil else {
                throw TLSConfigurationError(.duplicateServerName, path: path, "server name \"\(name)\" is listed twice")
            }
            self.wildcard[base] = context
        } else {
            guard self.exact[base] == nil else {
                throw TLSConfigurationError(.duplicateServerName, path: path, "server name \"\(name)\" is listed twice")
            }
            self.exact[base] = context
        }
    }

    /// The context for a client's SNI: exact match first, then a wildcard over its parent
    /// domain (one label only, as RFC 6125 matching does); nil for the default certificate.
    func context(for serverName: String) -> OpaquePointer? {
        let name = Self.normalized(serverName)
        if let context = self.exact[name] { return context }
        guard let dot = name.firstIndex(of: ".") else { return nil }
        return self.wildcard[String(name[name.index(after: dot)...])]
    }

    var isEmpty: Bool { self.exact.isEmpty && self.wildcard.isEmpty }

    private static func normalized(_ name: String) -> String {
        var lowered = name.lowercased()
        if lowered.hasSuffix(".") { lowered.removeLast() }
        return lowered
    }

    /// Letters, digits and hyphens in 1–63-byte labels, at least two labels, ≤ 253 bytes.
    private static func isDNSName(_ name: String) -> Bool {
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        guard name.utf8.count <= 253, labels.count >= 2 else { return false }
        return labels.allSatisfy { label in
            (1...63).contains(label.utf8.count) && label.first != "-" && label.last != "-"
                && label.utf8.allSatisfy { byte in
                    (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                        || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "-")
                }
        }
    }
}
