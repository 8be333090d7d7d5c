import RedisClient

/// The store keys: `redis` / `store`, and the Redis-only `redis_password_file`,
/// `redis_password_env`, `redis_tls`, `key_idle_ttl` and `counter_durability` (rows of
/// `PolicyDecoder`'s table).
extension PolicyDecoder {
    func decodeStore(_ top: Fields) throws(PolicyError) -> StoreConfiguration {
        switch (top["redis"], top["store"]) {
        case (.some, .some):
            throw self.reader.error(
                .conflictingKeys,
                top.keyMark("store"),
                top.path("store"),
                "give either redis: URL (shared state in Redis) or store: memory (one development node), not both"
            )
        case (.none, .none):
            throw self.reader.error(
                .missingKey,
                top.node.mark,
                "redis",
                "required: redis: redis://host:port/db, or store: memory for a single development node"
            )
        case (.some(let node), .none):
            let text = try self.reader.string(node, expected: "a redis:// or unix:// URL")
            let expected =
                "expected redis[s]://[[user]:password@]host[:port][/db], redis[s]-cluster://host:port[,host:port…], "
                + "redis[s]-sentinel://host[:port][,…]/master or unix:///path[?db=N]"
            // The URL may carry a password: never echo it (RedisURL's own messages quote only
            // the parts after the user information, once the scheme is right).
            let schemes = [
                "redis://", "redis-cluster://", "redis-sentinel://", "rediss://", "rediss-cluster://",
                "rediss-sentinel://", "unix://",
            ]
            guard schemes.contains(where: text.hasPrefix)
            else {
                let found = text.contains("@") ? "a URL with another scheme" : PolicyScalarReader.quote(text)
                throw self.reader.error(.invalidRedisURL, node, "\(expected); found \(found)")
            }
            do {
                _ = try RedisURL(parsing: text)
            } catch {
                throw self.reader.error(.invalidRedisURL, node, "\(expected); \(error.description)")
            }
            return .redis(url: text)
        case (.none, .some(let node)):
            let text = try self.reader.string(node, expected: "memory")
            guard text == "memory" else {
                let hint = text == "redis" ? " (for Redis write redis: redis://host:port/db instead)" : ""
                throw self.reader.error(
                    .invalidValue, node, "expected one of memory; found \(PolicyScalarReader.quote(text))\(hint)")
            }
            return .memory
        }
    }

    /// `redis_password_file` / `redis_password_env` / `key_idle_ttl`. The secret is checked
    /// (readable, non-empty) but never read into the policy nor quoted in a message.
    func decodeRedisOptions(_ top: Fields, store: StoreConfiguration) throws(PolicyError) -> RedisStoreOptions {
        var options = RedisStoreOptions()
        let given = ["redis_password_file", "redis_password_env", "redis_tls", "key_idle_ttl", "counter_durability"]
            .filter {
                top[$0] != nil
            }
        if case .memory = store, let first = given.first, let node = top[first] {
            throw self.reader.error(.conflictingKeys, node, "\(first) applies to redis: only, not to store: memory")
        }
        switch (top["redis_password_file"], top["redis_password_env"]) {
        case (.some, .some(let node)):
            throw self.reader.error(
                .conflictingKeys, node, "give either redis_password_file or redis_password_env, not both")
        case (.some(let node), .none):
            let text = try self.reader.string(node, expected: "a file path")
            let path = self.resolve(text)
            if case .failure(let reason) = RedisSecret.read(.file(path)) {
                throw self.reader.error(.secretUnavailable, node, reason.description)
            }
            options.password = .file(path)
        case (.none, .some(let node)):
            let name = try self.reader.string(node, expected: "an environment variable name")
            guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
                throw self.reader.error(
                    .invalidValue, node,
                    "expected an environment variable name; found \(PolicyScalarReader.quote(name))")
            }
            if case .failure(let reason) = RedisSecret.read(.environment(name)) {
                throw self.reader.error(.secretUnavailable, node, reason.description)
            }
            options.password = .environment(name)
        case (.none, .none):
            break
        }
        if options.password == nil, case .redis(let text) = store, let url = try? RedisURL(parsing: text),
            let user = url.username, url.password == nil, let node = top["redis"]
        {
            throw self.reader.error(
                .invalidRedisURL, node,
                "user \(PolicyScalarReader.quote(user)) needs a password: give redis_password_file or redis_password_env"
            )
        }
        options.tls = try self.decodeRedisTLS(top, store: store)
        if let node = top["key_idle_ttl"] {
            let expected = "a duration like 90d, 12h or whole seconds, from 1m to 3650d"
            var ttl: Duration?
            if case .scalar(let scalar) = node.content {
                switch scalar.value {
                case .int(let seconds): ttl = .seconds(seconds)
                case .string(let text):
                    if text.hasSuffix("d"), let days = Int(text.dropLast()), days > 0, days <= 3650 {
                        ttl = .seconds(days * 86_400)
                    } else {
                        ttl = PolicyValues.duration(text)
                    }
                default: ttl = nil
                }
            }
            guard let ttl, ttl >= .seconds(60), ttl <= .seconds(3650 * 86_400) else {
                throw self.reader.error(
                    .invalidDuration, node, "expected \(expected); found \(PolicyScalarReader.describe(node))")
            }
            options.keyIdleTTL = ttl
        }
        if let node = top["counter_durability"], try self.reader.oneOf(node, as: CounterDurability.self) == .replica {
            options.replicaWait = RedisStoreOptions.defaultReplicaWait
        }
        return options
    }
}

extension PolicyDecoder {
    /// `redis_tls: {ca_file, client_certificate, client_private_key, server_name}`, read like an
    /// `https://` upstream's keys. Allowed with a `rediss…://` URL only: with `redis://` it
    /// would be silently ignored, and the operator meant TLS.
    private func decodeRedisTLS(_ top: Fields, store: StoreConfiguration) throws(PolicyError) -> RedisTLSConfiguration?
    {
        guard case .redis(let text) = store, let url = try? RedisURL(parsing: text) else { return nil }
        guard let node = top["redis_tls"] else { return nil }
        guard url.usesTLS else {
            throw self.reader.error(
                .conflictingKeys, top.keyMark("redis_tls"), top.path("redis_tls"),
                "redis_tls applies to rediss://, rediss-cluster:// and rediss-sentinel:// URLs only; "
                    + "write the URL with rediss to use TLS")
        }
        let fields = try self.reader.mapping(node, keys: UpstreamTLSDecoder.keys)
        let host: String
        if case .tcp(let first, _) = url.address { host = first } else { host = "localhost" }
        guard let decoded = try self.upstreamTLS.decode(fields, host: host, isTLS: true, url: "rediss") else {
            return nil
        }
        return RedisTLSConfiguration(
            serverName: fields["server_name"] == nil ? nil : decoded.serverName,
            caFile: decoded.caFile,
            clientCertificate: decoded.clientCertificate)
    }
}

/// `counter_durability:`: `replica` waits for a replica to acknowledge each counter write.
private enum CounterDurability: String, CaseIterable {
    case primary, replica
}
