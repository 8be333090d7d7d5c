package import Foundation
package import RedisClient
import Synchronization

/// Debug tokens in Redis:
/// - `appattest:debugtoken:{<digest>}`: hash `name`, `created_at`, `expires_at`, `last_used`
///   (Unix seconds; `last_used` absent until first use). Looked up on the request path by the
///   digest of the presented token, one key, one script.
/// - `appattest:debugtokens`: hash name → digest (list and revoke by name).
///
/// Create and revoke touch both keys in two steps (they lie in different cluster slots): the
/// name is claimed first (`HSETNX`) and released last, so a name never points at a half-made
/// record for longer than one step. These run from the CLI, off the request path.
extension RedisStore {
    static func debugTokenKey(_ digest: String) -> [UInt8] { Array("appattest:debugtoken:{\(digest)}".utf8) }
    static let debugTokenIndexKey = Array("appattest:debugtokens".utf8)

    /// KEYS[1] = token record; ARGV[1] = now (Unix seconds). Returns {1, name} accepted (last
    /// use set), {0, name} expired, {-1} unknown.
    static let useDebugTokenScript = RedisScript(
        """
        local v = redis.call('HMGET', KEYS[1], 'name', 'expires_at')
        if not v[1] then return {-1} end
        if tonumber(v[2]) == nil or tonumber(v[2]) <= tonumber(ARGV[1]) then return {0, v[1]} end
        redis.call('HSET', KEYS[1], 'last_used', ARGV[1])
        return {1, v[1]}
        """
    )

    package func createDebugToken(
        _ record: DebugTokenRecord, digest: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        let connection = self.callerConnection
        connection.send(
            [Self.bytes("HSETNX"), Self.debugTokenIndexKey, Self.bytes(record.name), Self.bytes(digest)],
            key: Self.debugTokenIndexKey
        ) {
            let claimed = RedisReplies.interpret($0, command: "HSETNX") { reply -> Bool? in
                if case .integer(let n) = reply { return n == 1 }
                return nil
            }
            guard case .success(true) = claimed else {
                completion(claimed)
                return
            }
            var arguments: [[UInt8]] = [Self.bytes("HSET"), Self.debugTokenKey(digest)]
            arguments += [Self.bytes("name"), Self.bytes(record.name)]
            arguments += [Self.bytes("created_at"), Self.bytes(String(Self.unixSeconds(record.createdAt)))]
            arguments += [Self.bytes("expires_at"), Self.bytes(String(Self.unixSeconds(record.expiresAt)))]
            connection.send(arguments, key: Self.debugTokenKey(digest)) {
                completion(
                    RedisReplies.interpret($0, command: "HSET") { reply -> Bool? in
                        if case .integer = reply { return true }
                        return nil
                    })
            }
        }
    }

    package func useDebugToken(
        digest: String, now: Date, completion: @escaping @Sendable (Result<DebugTokenUse, StoreError>) -> Void
    ) {
        self.callerConnection.evaluate(
            Self.useDebugTokenScript, keys: [Self.debugTokenKey(digest)],
            arguments: [Self.bytes(String(Self.unixSeconds(now)))]
        ) {
            completion(
                RedisReplies.interpret($0, command: "EVALSHA use_debug_token") { reply -> DebugTokenUse? in
                    guard case .array(let items) = reply, case .integer(let code)? = items.first else { return nil }
                    switch (code, items.count) {
                    case (-1, 1): return .unknown
                    case (1, 2), (0, 2):
                        guard case .bulk(let name) = items[1] else { return nil }
                        let text = String(decoding: name, as: UTF8.self)
                        return code == 1 ? .accepted(name: text) : .expired(name: text)
                    default: return nil
                    }
                })
        }
    }

    package func listDebugTokens(completion: @escaping @Sendable (Result<[DebugTokenRecord], StoreError>) -> Void) {
        let connection = self.callerConnection
        connection.send([Self.bytes("HGETALL"), Self.debugTokenIndexKey], key: Self.debugTokenIndexKey) { result in
            let index = RedisReplies.interpret(result, command: "HGETALL") { reply -> [String]? in
                guard case .array(let items) = reply, items.count % 2 == 0 else { return nil }
                var digests: [String] = []
                for i in stride(from: 1, to: items.count, by: 2) {
                    guard case .bulk(let digest) = items[i] else { return nil }
                    digests.append(String(decoding: digest, as: UTF8.self))
                }
                return digests
            }
            guard case .success(let digests) = index else {
                if case .failure(let error) = index { completion(.failure(error)) }
                return
            }
            if digests.isEmpty {
                completion(.success([]))
                return
            }
            // One HGETALL per token, pipelined; completes when the last reply is in.
            let state = Mutex<(records: [DebugTokenRecord], remaining: Int, failure: StoreError?)>(
                ([], digests.count, nil))
            for digest in digests {
                connection.send([Self.bytes("HGETALL"), Self.debugTokenKey(digest)], key: Self.debugTokenKey(digest)) {
                    reply in
                    let record = RedisReplies.interpret(reply, command: "HGETALL") { reply -> DebugTokenRecord?? in
                        Self.decodeDebugToken(reply)
                    }
                    let finished = state.withLock { state -> Result<[DebugTokenRecord], StoreError>? in
                        switch record {
                        case .success(let record?): state.records.append(record)
                        case .success(nil): break  // revoked between the two reads
                        case .failure(let error): state.failure = state.failure ?? error
                        }
                        state.remaining -= 1
                        guard state.remaining == 0 else { return nil }
                        if let failure = state.failure { return .failure(failure) }
                        return .success(state.records.sorted { $0.name < $1.name })
                    }
                    if let finished { completion(finished) }
                }
            }
        }
    }

    package func revokeDebugToken(name: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        let connection = self.callerConnection
        connection.send([Self.bytes("HGET"), Self.debugTokenIndexKey, Self.bytes(name)], key: Self.debugTokenIndexKey) {
            result in
            let digest = RedisReplies.interpret(result, command: "HGET") { reply -> String?? in
                switch reply {
                case .bulk(let bytes): return .some(String(decoding: bytes, as: UTF8.self))
                case .null: return .some(nil)
                default: return nil
                }
            }
            switch digest {
            case .failure(let error):
                completion(.failure(error))
            case .success(nil):
                completion(.success(false))
            case .success(let digest?):
                connection.send([Self.bytes("DEL"), Self.debugTokenKey(digest)], key: Self.debugTokenKey(digest)) {
                    deleted in
                    if case .failure(let error) = RedisReplies.interpret(deleted, command: "DEL", { _ in true }) {
                        completion(.failure(error))
                        return
                    }
                    connection.send(
                        [Self.bytes("HDEL"), Self.debugTokenIndexKey, Self.bytes(name)], key: Self.debugTokenIndexKey
                    ) { released in
                        completion(RedisReplies.interpret(released, command: "HDEL") { _ in true })
                    }
                }
            }
        }
    }

    /// A token record from HGETALL; `.some(nil)` when the hash is empty (no such token).
    static func decodeDebugToken(_ reply: RedisReply) -> DebugTokenRecord?? {
        guard case .array(let items) = reply, items.count % 2 == 0 else { return nil }
        if items.isEmpty { return .some(nil) }
        var fields: [String: String] = [:]
        for i in stride(from: 0, to: items.count, by: 2) {
            guard case .bulk(let name) = items[i], case .bulk(let value) = items[i + 1] else { return nil }
            fields[String(decoding: name, as: UTF8.self)] = String(decoding: value, as: UTF8.self)
        }
        guard let name = fields["name"], let created = fields["created_at"].flatMap({ Int64($0) }),
            let expires = fields["expires_at"].flatMap({ Int64($0) })
        else { return nil }
        return .some(
            DebugTokenRecord(
                name: name,
                createdAt: Date(timeIntervalSince1970: TimeInterval(created)),
                expiresAt: Date(timeIntervalSince1970: TimeInterval(expires)),
                lastUsedAt: fields["last_used"].flatMap { Int64($0) }.map {
                    Date(timeIntervalSince1970: TimeInterval($0))
                }
            ))
    }
}
