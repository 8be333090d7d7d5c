/// What a Redis Cluster error reply tells the client to do (cluster specification,
/// "Redirection and resharding"). Pure: parsed from the reply text, no I/O.
package enum RedisRedirect: Sendable, Hashable {
    /// `-MOVED <slot> <host>:<port>`: the slot lives on that node now; update the map and retry.
    case moved(slot: Int, node: RedisNodeAddress)
    /// `-ASK <slot> <host>:<port>`: this one command goes to that node, preceded by `ASKING`;
    /// the map does not change (the slot is being migrated).
    case ask(slot: Int, node: RedisNodeAddress)
    /// `-TRYAGAIN …` (multi-key operation during a migration) or `-CLUSTERDOWN …` (the
    /// cluster cannot serve the slot now): retry after a bounded backoff.
    case retryLater(code: String)

    /// Parses an error reply's text (without the leading `-`); nil when it is no redirect.
    /// `MOVED 3999 :6381` (an empty host: the endpoint is unknown to the node, Redis ≥ 7)
    /// resolves to `currentHost`, the host of the node that answered.
    package init?(errorText: String, currentHost: String) {
        let words = errorText.split(separator: " ", omittingEmptySubsequences: true)
        guard let code = words.first else { return nil }
        switch code {
        case "MOVED", "ASK":
            guard words.count >= 3, let slot = Int(words[1]), slot >= 0, slot < RedisHashSlot.count,
                let node = RedisNodeAddress(parsing: words[2], defaultHost: currentHost)
            else {
                return nil
            }
            self = code == "MOVED" ? .moved(slot: slot, node: node) : .ask(slot: slot, node: node)
        case "TRYAGAIN", "CLUSTERDOWN":
            self = .retryLater(code: String(code))
        default:
            return nil
        }
    }
}

/// A Redis node's `host:port` (IPv6 hosts without brackets in `host`).
package struct RedisNodeAddress: Sendable, Hashable, Comparable, CustomStringConvertible {
    package var host: String
    package var port: UInt16

    package init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// `host:port`, `[v6]:port` or `:port` (then `defaultHost`). The port is the text after
    /// the last colon (Redis writes IPv6 endpoints without brackets in redirects).
    package init?<Text: StringProtocol>(parsing text: Text, defaultHost: String? = nil) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]), port > 0
        else {
            return nil
        }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.isEmpty {
            guard let defaultHost else { return nil }
            host = defaultHost
        }
        self.host = host
        self.port = port
    }

    package var description: String {
        self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)"
    }

    package static func < (a: Self, b: Self) -> Bool { (a.host, a.port) < (b.host, b.port) }
}
