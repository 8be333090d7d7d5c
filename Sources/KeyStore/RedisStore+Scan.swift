package import RedisClient
import Synchronization

extension RedisStore {
    /// The key IDs of every key record whose key ID starts with `prefix` (all when empty), by
    /// `SCAN … MATCH appattest:key:{<prefix>*}` on every primary (cluster: each node holds its
    /// own slots). At most `limit` IDs, sorted. For the `keys list|find` CLI: it walks the
    /// whole key space, so never call it on the request path.
    package func scanKeyIDs(
        prefix: String,
        limit: Int = 10_000,
        completion: @escaping @Sendable (Result<[String], StoreError>) -> Void
    ) {
        let pattern = "appattest:key:{" + Self.globEscaped(prefix) + "*}"
        self.shared.withPrimaryConnections { connections in
            guard !connections.isEmpty else {
                completion(.failure(StoreError(.unavailable, "redis \(self.url): no primary to scan")))
                return
            }
            let state = Mutex<(remaining: Int, found: Set<String>, failure: StoreError?)>((connections.count, [], nil))
            for connection in connections {
                Self.scan(connection, cursor: "0", pattern: pattern, limit: limit) { result in
                    let finished = state.withLock { state -> Result<[String], StoreError>? in
                        switch result {
                        case .success(let ids): state.found.formUnion(ids)
                        case .failure(let error): state.failure = state.failure ?? error
                        }
                        state.remaining -= 1
                        guard state.remaining == 0 else { return nil }
                        if let failure = state.failure { return .failure(failure) }
                        return .success(Array(state.found.sorted().prefix(limit)))
                    }
                    if let finished { completion(finished) }
                }
            }
        }
    }

    private static func scan(
        _ connection: RedisConnection, cursor: String, pattern: String, limit: Int, found: [String] = [],
        completion: @escaping @Sendable (Result<[String], StoreError>) -> Void
    ) {
        let command: [[UInt8]] = [
            Array("SCAN".utf8), Array(cursor.utf8), Array("MATCH".utf8), Array(pattern.utf8), Array("COUNT".utf8),
            Array("1000".utf8),
        ]
        connection.send(command) { result in
            switch result {
            case .failure(let error):
                completion(.failure(error))
            case .success(.array(let items)) where items.count == 2:
                guard let next = items[0].text, case .array(let keys) = items[1] else {
                    completion(.failure(StoreError(.protocolError, "unexpected SCAN reply")))
                    return
                }
                var found = found
                for case .bulk(let key) in keys {
                    let text = String(decoding: key, as: UTF8.self)
                    if text.hasPrefix("appattest:key:{"), text.hasSuffix("}") {
                        found.append(String(text.dropFirst("appattest:key:{".count).dropLast()))
                    }
                }
                if next == "0" || found.count >= limit {
                    completion(.success(found))
                } else {
                    Self.scan(
                        connection, cursor: next, pattern: pattern, limit: limit, found: found, completion: completion)
                }
            case .success(let reply):
                completion(
                    .failure(RedisReplies.serverError(reply, command: "SCAN") ?? StoreError(.protocolError, "SCAN")))
            }
        }
    }

    /// `prefix` with the glob characters of `MATCH` escaped (base64 has none but `+/=`).
    static func globEscaped(_ prefix: String) -> String {
        var out = ""
        for character in prefix {
            if "*?[]\\{}".contains(character) { out.append("\\") }
            out.append(character)
        }
        return out
    }
}
