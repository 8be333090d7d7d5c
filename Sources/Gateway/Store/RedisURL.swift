/// Where the Redis server is: `redis://[:password@]host:port/db` or `unix:///path[?db=N]`.
package struct RedisURL: Sendable, Hashable, CustomStringConvertible {
    package enum Address: Sendable, Hashable {
        case tcp(host: String, port: UInt16)
        case unix(path: String)
    }

    package var address: Address
    package var password: String?
    package var database: Int

    /// Parses the URL; the error text says which part is wrong (for config errors).
    package init(parsing text: String) throws(RedisURLError) {
        if text.hasPrefix("unix://") {
            var rest = String(text.dropFirst("unix://".count))
            var database = 0
            if let q = rest.firstIndex(of: "?") {
                let query = rest[rest.index(after: q)...]
                rest = String(rest[..<q])
                guard query.hasPrefix("db="), let db = Int(query.dropFirst(3)), db >= 0 else {
                    throw RedisURLError("unix URL query must be ?db=N, got ?\(query)")
                }
                database = db
            }
            guard rest.hasPrefix("/") else { throw RedisURLError("unix URL needs an absolute path: unix:///path") }
            self.address = .unix(path: rest)
            self.password = nil
            self.database = database
            return
        }
        guard text.hasPrefix("redis://") else {
            throw RedisURLError("scheme must be redis:// or unix://, got \(text.prefix(12))")
        }
        var rest = Substring(text.dropFirst("redis://".count))
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            // `:password` (no user) or `user:password`; only the password is used (Redis < 6 AUTH).
            if let colon = userInfo.firstIndex(of: ":") {
                password = String(userInfo[userInfo.index(after: colon)...])
            } else {
                password = String(userInfo)
            }
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let dbText = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
            if !dbText.isEmpty {
                guard let db = Int(dbText), db >= 0, db < 1 << 16 else {
                    throw RedisURLError("database must be a number, got /\(dbText)")
                }
                database = db
            }
        }
        var host: Substring
        var port: UInt16 = 6379
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw RedisURLError("unterminated [IPv6] host") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let p = UInt16(after.dropFirst()), p > 0 else {
                    throw RedisURLError("port must be 1-65535, got \(after)")
                }
                port = p
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            guard let p = UInt16(rest[rest.index(after: colon)...]), p > 0 else {
                throw RedisURLError("port must be 1-65535, got \(rest[rest.index(after: colon)...])")
            }
            port = p
        } else {
            host = rest
        }
        guard !host.isEmpty else { throw RedisURLError("missing host") }
        self.address = .tcp(host: String(host), port: port)
        self.password = password
        self.database = database
    }

    /// Never includes the password.
    package var description: String {
        switch self.address {
        case .tcp(let host, let port):
            let h = host.contains(":") ? "[\(host)]" : host
            return "redis://\(self.password == nil ? "" : ":***@")\(h):\(port)/\(self.database)"
        case .unix(let path):
            return "unix://\(path)?db=\(self.database)"
        }
    }
}

package struct RedisURLError: Error, Hashable, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}
