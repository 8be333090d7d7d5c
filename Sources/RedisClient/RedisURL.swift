/// Where Redis is and how to log in:
///
/// - `redis://[[user]:password@]host[:port][/db]`: one node.
/// - `unix:///path[?db=N]`: one node on a Unix socket.
/// - `redis-cluster://[[user]:password@]host:port[,host:port…][/]`: a Redis Cluster, found from
///   any of the seed nodes (database 0 only: clusters have no other).
/// - `redis-sentinel://[[user]:password@]host[:port][,host[:port]…]/<master name>[/db]`: the
///   primary that the Sentinels name (sentinel port 26379 by default); the user and password
///   are the data nodes' (the sentinels are asked without AUTH).
///
/// TLS: `rediss://`, `rediss-cluster://` and `rediss-sentinel://` are the same forms over TLS
/// (for Sentinel: to the sentinels and to the data nodes alike), with the policy's `redis_tls`
/// (CA file, client certificate, server name). Unix sockets have no TLS form.
///
/// A user (`redis://app:pw@…`, or `redis://app@…` with the password from a secret) logs in
/// with `AUTH user password` (Redis ≥ 6 ACL users); a password alone (`redis://:pw@…`) with
/// `AUTH password`. The password belongs in a file or an
/// environment variable (policy keys `redis_password_file` / `redis_password_env`), which
/// `withPassword` applies; `description` never contains it.
package struct RedisURL: Sendable, Hashable, CustomStringConvertible {
    package enum Address: Sendable, Hashable {
        case tcp(host: String, port: UInt16)
        case unix(path: String)
    }

    package enum Topology: Sendable, Hashable {
        /// `redis://`, `unix://`: `address` is the node.
        case node
        /// `redis-cluster://`: `address` is the first seed; `seeds` all of them.
        case cluster(seeds: [RedisNodeAddress])
        /// `redis-sentinel://`: the sentinels and the name of the monitored primary.
        case sentinel(sentinels: [RedisNodeAddress], masterName: String)
    }

    package var address: Address
    package var username: String?
    package var password: String?
    package var database: Int
    package var topology: Topology
    /// `rediss…://`: every connection of the store speaks TLS.
    package var usesTLS: Bool

    package static let defaultPort: UInt16 = 6379
    package static let defaultSentinelPort: UInt16 = 26379

    /// One node, with the same credentials (cluster nodes, the primary Sentinel names).
    package init(
        node: RedisNodeAddress, username: String?, password: String?, database: Int = 0, usesTLS: Bool = false
    ) {
        self.usesTLS = usesTLS
        self.address = .tcp(host: node.host, port: node.port)
        self.username = username
        self.password = password
        self.database = database
        self.topology = .node
    }

    /// Parses the URL; the error text says which part is wrong (for config errors) and never
    /// quotes the user information.
    package init(parsing text: String) throws(RedisURLError) {
        self.username = nil
        self.password = nil
        self.database = 0
        self.topology = .node
        self.usesTLS = false
        if text.hasPrefix("unix://") {
            var rest = String(text.dropFirst("unix://".count))
            if let q = rest.firstIndex(of: "?") {
                let query = rest[rest.index(after: q)...]
                rest = String(rest[..<q])
                guard query.hasPrefix("db="), let db = Int(query.dropFirst(3)), db >= 0 else {
                    throw RedisURLError("unix URL query must be ?db=N, got ?\(query)")
                }
                self.database = db
            }
            guard rest.hasPrefix("/") else { throw RedisURLError("unix URL needs an absolute path: unix:///path") }
            self.address = .unix(path: rest)
            return
        }
        let scheme: String
        let schemes = ["redis://", "redis-cluster://", "redis-sentinel://"]
        if let found = schemes.first(where: { text.hasPrefix($0) }) {
            scheme = found
        } else if let found = schemes.first(where: { text.hasPrefix("rediss" + $0.dropFirst(5)) }) {
            scheme = found
            self.usesTLS = true
        } else {
            throw RedisURLError(
                "scheme must be redis://, rediss://, redis-cluster://, rediss-cluster://, redis-sentinel://, "
                    + "rediss-sentinel:// or unix://, got \(text.prefix(12))"
            )
        }
        let prefixCount = scheme.count + (self.usesTLS ? 1 : 0)
        var rest = Substring(text.dropFirst(prefixCount))
        // User information ends at the last `@` before the first `/` (a password may hold `/`
        // only if it has no `@` after it: write such passwords in a file instead).
        let authority = rest.firstIndex(of: "/").map { rest[..<$0] } ?? rest
        if let at = authority.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = userInfo.firstIndex(of: ":") {
                let user = userInfo[..<colon]
                self.username = user.isEmpty ? nil : String(user)
                self.password = String(userInfo[userInfo.index(after: colon)...])
            } else if !userInfo.isEmpty {
                // `redis://user@host` (URL semantics): the password comes from a secret.
                self.username = String(userInfo)
            }
        }
        var path: Substring = ""
        if let slash = rest.firstIndex(of: "/") {
            path = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
        }
        let defaultPort = scheme == "redis-sentinel://" ? Self.defaultSentinelPort : Self.defaultPort
        let hosts = try rest.split(separator: ",", omittingEmptySubsequences: false).map {
            (part) throws(RedisURLError) in try Self.hostPort(part, defaultPort: defaultPort)
        }
        guard let first = hosts.first else { throw RedisURLError("missing host") }
        self.address = .tcp(host: first.host, port: first.port)
        switch scheme {
        case "redis://":
            guard hosts.count == 1 else {
                throw RedisURLError("redis:// names one node; for several use redis-cluster:// or redis-sentinel://")
            }
            self.database = try Self.database(path)
        case "redis-cluster://":
            guard path.isEmpty || path == "0" else {
                throw RedisURLError("a Redis Cluster has database 0 only, got /\(path)")
            }
            self.topology = .cluster(seeds: hosts)
        default:
            let parts = path.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = parts.first, !name.isEmpty,
                name.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) })
            else {
                throw RedisURLError("redis-sentinel:// needs the master name: redis-sentinel://host:port/mymaster")
            }
            self.database = parts.count == 2 ? try Self.database(parts[1]) : 0
            self.topology = .sentinel(sentinels: hosts, masterName: String(name))
        }
    }

    private static func database(_ text: Substring) throws(RedisURLError) -> Int {
        if text.isEmpty { return 0 }
        guard let db = Int(text), db >= 0, db < 1 << 16 else {
            throw RedisURLError("database must be a number, got /\(text)")
        }
        return db
    }

    private static func hostPort(_ text: Substring, defaultPort: UInt16) throws(RedisURLError) -> RedisNodeAddress {
        var host: Substring
        var port = defaultPort
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw RedisURLError("unterminated [IPv6] host") }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let p = UInt16(after.dropFirst()), p > 0 else {
                    throw RedisURLError("port must be 1-65535, got \(after)")
                }
                port = p
            }
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            guard let p = UInt16(text[text.index(after: colon)...]), p > 0 else {
                throw RedisURLError("port must be 1-65535, got \(text[text.index(after: colon)...])")
            }
            port = p
        } else {
            host = text
        }
        guard !host.isEmpty else { throw RedisURLError("missing host") }
        return RedisNodeAddress(host: String(host), port: port)
    }

    /// The same URL with the password from a secret (file or environment), replacing any in
    /// the URL.
    package func withPassword(_ password: String?) -> RedisURL {
        var copy = self
        if let password { copy.password = password }
        return copy
    }

    /// Never includes the password (the user name is shown: it is not a secret).
    package var description: String {
        let credentials: String
        switch (self.username, self.password) {
        case (let user?, _): credentials = "\(user):***@"
        case (nil, _?): credentials = ":***@"
        case (nil, nil): credentials = ""
        }
        let s = self.usesTLS ? "s" : ""
        switch (self.topology, self.address) {
        case (.cluster(let seeds), _):
            return "redis\(s)-cluster://\(credentials)\(seeds.map(\.description).joined(separator: ","))/"
        case (.sentinel(let sentinels, let name), _):
            return
                "redis\(s)-sentinel://\(credentials)\(sentinels.map(\.description).joined(separator: ","))/\(name)/\(self.database)"
        case (.node, .tcp(let host, let port)):
            return "redis\(s)://\(credentials)\(RedisNodeAddress(host: host, port: port))/\(self.database)"
        case (.node, .unix(let path)):
            return "unix://\(path)?db=\(self.database)"
        }
    }
}

package struct RedisURLError: Error, Hashable, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}
