package import Foundation
package import GatewayIO
package import RedisClient
import Synchronization

/// `AttestStore` on Redis: shared by every gateway instance.
///
/// Layout (every key of one operation shares its `{…}` hash tag, so it works on Redis Cluster):
/// - challenge: string `appattest:ch:{<challenge>}` = "1" with the TTL; `SET … EX ttl NX`
///   to store, `GETDEL` to consume (one use, no race; Redis ≥ 6.2).
/// - key: hash `appattest:key:{<keyID>}` with fields `public_key` (65 raw bytes), `counter`
///   (decimal), `app_id`, `environment`, `receipt` (raw bytes), `attested_at` (Unix seconds),
///   `status` (`active` | `revoked`), and when known `validation_category` (decimal) and
///   `bundle_version` (iOS 27 launch validation at attestation), `key_access_policy` (macOS 27:
///   `macos_full_security` or `other`), `seen` (the counter window's
///   seen-map, see `CounterWindow`). Created, advanced and revoked by Lua scripts (EVALSHA),
///   so each is one atomic step on the server, whatever the number of gateways.
///
/// Connections: one per event loop it is given, driven by that loop, plus one on its own queue
/// for every other caller (CLI, tests, work off the loops). A call made on a loop goes out on
/// that loop's connection and completes on that loop: the gate calls the store only from the
/// connection's loop (`RequestGate.decide`), so a verified request's store work never changes
/// thread. Every call completes exactly once, on the loop or queue of the connection that
/// carried it.
package final class RedisStore: AttestStore {
    /// The router for callers that are not on a loop queue: one `RedisConnection` (one node,
    /// or the Sentinel-named primary), or a `RedisClusterClient`.
    let shared: any RedisCommandRouting
    /// `loopRouters[i]` lives on `loops[i]`.
    private let loopRouters: [any RedisCommandRouting]
    private let loops: [EventLoop]
    /// Sentinel mode: asks the sentinels for the primary, shared by every connection.
    private let sentinel: RedisSentinelResolver?
    /// Cluster and Sentinel events (redirects, topology refreshes, failovers) for `/metrics`.
    package let clusterCounters = RedisClusterCounters()
    package let url: RedisURL
    /// `key_idle_ttl` in milliseconds as a script argument (`0`: records never expire).
    let idleTTLArgument: [UInt8]
    /// `WAIT 1 <ms>` after each advance (`counter_durability: replica`), else nil.
    let waitArguments: [[UInt8]]?

    /// The first connection of the shared router (one node: *the* connection; tests inspect it).
    package var connection: RedisConnection { self.shared.allConnections[0] }

    /// The queue completions of calls from elsewhere than the loops run on.
    package var queue: DispatchQueue {
        // The shared router is made without a loop, so it has a Dispatch queue of its own.
        guard let queue = self.shared.queue.dispatchQueue else { preconditionFailure("the shared router is off-loop") }
        return queue
    }

    /// Every connection: the shared router's first, then each loop's (cluster: one per node each).
    package var connections: [RedisConnection] { self.routers.flatMap(\.allConnections) }

    /// Sentinel mode: the connections that ask the sentinels (empty otherwise).
    package var sentinelConnections: [RedisConnection] { self.sentinel?.sentinelConnections ?? [] }

    private var routers: [any RedisCommandRouting] { [self.shared] + self.loopRouters }

    /// Every connection connected, authenticated and scripts loaded, and (cluster) every slot
    /// served (for `/readyz` without a round trip).
    package var isReady: Bool { self.routers.allSatisfy(\.isReady) }

    /// Connects at once (asynchronously); commands sent before the connection is ready wait
    /// for the first attempt (one node), or for the first slot map (cluster).
    ///
    /// - Parameter loops: the event loops that call the store; each gets connections of its
    ///   own (cluster: one per primary), on its queue and driven by its epoll.
    /// - Parameter tls: for a `rediss…://` URL: every connection (cluster nodes and sentinels
    ///   included) speaks TLS with it. Required when `url.usesTLS` (see `RedisTLS`).
    package init(
        url: RedisURL,
        configuration: RedisConfiguration = RedisConfiguration(),
        label: String = "attest-gateway.redis",
        loops: [EventLoop] = [],
        tls: RedisTLS? = nil
    ) {
        self.url = url
        // rediss:// without settings: the system trust store, the URL's host (as with no
        // `redis_tls:`). Should even that fail, every connect fails naming why.
        let tls = tls ?? (url.usesTLS ? try? RedisTLS(context: TLSClientContext(settings: TLSClientSettings())) : nil)
        self.idleTTLArgument = Array(String(configuration.keyIdleTTL.map { max(1, $0.milliseconds) } ?? 0).utf8)
        // WAIT gives up well before the command timeout, so that "no replica" is reported as
        // such rather than as a timeout.
        self.waitArguments = configuration.replicaAcknowledgementTimeout.map {
            let milliseconds = min($0.milliseconds, configuration.commandTimeout.milliseconds / 2)
            return [Array("WAIT".utf8), Array("1".utf8), Array(String(max(1, milliseconds)).utf8)]
        }
        let counters = self.clusterCounters
        let sentinel: RedisSentinelResolver?
        if case .sentinel(let sentinels, let masterName) = url.topology {
            sentinel = RedisSentinelResolver(
                sentinels: sentinels, masterName: masterName, configuration: configuration, counters: counters,
                label: "\(label).sentinel", tls: tls)
        } else {
            sentinel = nil
        }
        self.sentinel = sentinel
        func router(label: String, loop: EventLoop?) -> any RedisCommandRouting {
            if case .cluster(let seeds) = url.topology {
                return RedisClusterClient(
                    seeds: seeds, username: url.username, password: url.password, configuration: configuration,
                    scripts: Self.scripts, label: label, loop: loop, counters: counters, tls: tls)
            }
            return RedisConnection(
                url: url, configuration: configuration, scripts: Self.scripts, label: label, loop: loop,
                resolver: sentinel, tls: tls)
        }
        self.shared = router(label: label, loop: nil)
        self.loops = loops
        self.loopRouters = loops.enumerated().map { index, loop in router(label: "\(label).loop\(index)", loop: loop) }
        // The sentinels first: a data connection asks them as it starts, and a sentinel
        // connection not yet started answers "not started", which cost the first attempt and
        // a backoff, and hid why the sentinels could not be asked (an untrusted certificate).
        sentinel?.start()
        for case let connection as RedisConnection in self.routers {
            sentinel?.watch(connection)
            connection.start()
        }
    }

    deinit {
        for router in self.routers {
            router.close(completion: nil)
        }
        self.sentinel?.close()
    }

    /// Closes every connection (last step of a graceful shutdown); commands still in flight and
    /// later calls complete with `StoreError.unavailable`. `completion` runs on `queue` once all
    /// are closed.
    package func close(completion: (@Sendable () -> Void)? = nil) {
        let group = DispatchGroup()
        for router in self.routers {
            group.enter()
            router.close { group.leave() }
        }
        self.sentinel?.close()
        if let completion {
            group.notify(queue: self.queue, execute: completion)
        }
    }

    /// The caller's loop router when it runs on one of the store's loops, else the shared one.
    var callerConnection: any RedisCommandRouting {
        if let current = EventLoop.current {
            // A handful of loops: a scan of identities costs less than a hash lookup.
            for index in self.loops.indices where self.loops[index] === current {
                return self.loopRouters[index]
            }
        }
        return self.shared
    }

    // MARK: - Layout

    static func challengeKey(_ challenge: String) -> [UInt8] { Array("appattest:ch:{\(challenge)}".utf8) }
    static func keyRecordKey(_ keyID: String) -> [UInt8] { Self.taggedKey(Self.keyRecordPrefix, keyID) }

    private static let keyRecordPrefix = Array("appattest:key:{".utf8)

    /// `prefix` + `tag` + `}` in one allocation (no interpolated `String` first).
    static func taggedKey(_ prefix: [UInt8], _ tag: String) -> [UInt8] {
        var tag = tag
        return tag.withUTF8 { utf8 in
            var key: [UInt8] = []
            key.reserveCapacity(prefix.count + utf8.count + 1)
            key.append(contentsOf: prefix)
            key.append(contentsOf: utf8)
            key.append(UInt8(ascii: "}"))
            return key
        }
    }

    /// KEYS[1] = record; ARGV = public_key, counter, app_id, environment, receipt, attested_at, status,
    /// validation_category, bundle_version (these two empty when absent: the field is not set),
    /// idle TTL in ms (`0`: none, the record never expires), key_access_policy (empty when absent),
    /// platform (empty for App Attest: the field is not set), play_integrity_verdict and
    /// play_integrity_verified_at (empty when the app asks no Play Integrity verdict). Returns 1
    /// when created, 0 when the record existed.
    static let createKeyScript = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
        redis.call('HSET', KEYS[1], 'public_key', ARGV[1], 'counter', ARGV[2], 'app_id', ARGV[3],
          'environment', ARGV[4], 'receipt', ARGV[5], 'attested_at', ARGV[6], 'status', ARGV[7])
        if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'validation_category', ARGV[8]) end
        if ARGV[9] ~= '' then redis.call('HSET', KEYS[1], 'bundle_version', ARGV[9]) end
        if ARGV[11] ~= '' then redis.call('HSET', KEYS[1], 'key_access_policy', ARGV[11]) end
        if ARGV[12] and ARGV[12] ~= '' then redis.call('HSET', KEYS[1], 'platform', ARGV[12]) end
        if ARGV[13] and ARGV[13] ~= '' then
          redis.call('HSET', KEYS[1], 'pi_verdict', ARGV[13], 'pi_verified_at', ARGV[14])
        end
        local ttl = tonumber(ARGV[10])
        if ttl and ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
        return 1
        """
    )

    /// KEYS[1] = record. Returns 1 when revoked, 0 when there is no such key. A revoked
    /// record never expires (`PERSIST`): the revocation outlives `key_idle_ttl`.
    static let revokeKeyScript = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
        redis.call('HSET', KEYS[1], 'status', 'revoked')
        redis.call('PERSIST', KEYS[1])
        return 1
        """
    )

    /// KEYS[1] = record; ARGV = verdict, Unix seconds. Returns 1 when recorded, 0 when there
    /// is no such key or it is revoked. Touches nothing else (not the idle TTL).
    static let recordPlayIntegrityScript = RedisScript(
        """
        if redis.call('HGET', KEYS[1], 'status') ~= 'active' then return 0 end
        redis.call('HSET', KEYS[1], 'pi_verdict', ARGV[1], 'pi_verified_at', ARGV[2])
        return 1
        """
    )

    static let scripts = [
        createKeyScript, advanceCounterScript, revokeKeyScript, useDebugTokenScript, recordPlayIntegrityScript,
    ]

    // MARK: - AttestStore

    package func putChallenge(
        _ challenge: String,
        ttlSeconds: Int,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        let ttl = max(1, ttlSeconds)
        let key = Self.challengeKey(challenge)
        self.callerConnection.send(
            [
                Self.bytes("SET"), key, Self.bytes("1"), Self.bytes("EX"), Self.bytes(String(ttl)),
                Self.bytes("NX"),
            ], key: key
        ) {
            completion(
                RedisReplies.interpret($0, command: "SET") { reply in
                    switch reply {
                    case .status("OK"): return true
                    case .null: return false
                    default: return nil
                    }
                }
            )
        }
    }

    package func sharedSecret(
        name: String,
        proposed: [UInt8],
        completion: @escaping @Sendable (Result<[UInt8], StoreError>) -> Void
    ) {
        let key = Array("appattest:secret:{\(name)}".utf8)
        self.callerConnection.send(
            [Self.bytes("SET"), key, proposed, Self.bytes("NX"), Self.bytes("GET")], key: key
        ) {
            completion(
                RedisReplies.interpret($0, command: "SET") { reply in
                    switch reply {
                    case .null: return proposed
                    case .bulk(let stored): return stored
                    default: return nil
                    }
                }
            )
        }
    }

    package func consumeChallenge(
        _ challenge: String,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        let key = Self.challengeKey(challenge)
        self.callerConnection.send([Self.bytes("GETDEL"), key], key: key) {
            completion(
                RedisReplies.interpret($0, command: "GETDEL") { reply in
                    switch reply {
                    case .bulk: return true
                    case .null: return false
                    default: return nil
                    }
                }
            )
        }
    }

    package func createKey(
        _ record: KeyRecord,
        completion: @escaping @Sendable (Result<KeyCreation, StoreError>) -> Void
    ) {
        let arguments: [[UInt8]] = [
            record.publicKey,
            Self.bytes(String(record.counter)),
            Self.bytes(record.appID),
            Self.bytes(record.environment),
            record.receipt,
            Self.bytes(String(Self.unixSeconds(record.attestedAt))),
            Self.bytes(record.status.rawValue),
            Self.bytes(record.validationCategory.map { String($0) } ?? ""),
            Self.bytes(record.bundleVersion ?? ""),
            self.idleTTLArgument,
            Self.bytes(record.keyAccessPolicy ?? ""),
            Self.bytes(record.platform ?? ""),
            Self.bytes(record.playIntegrityVerdict ?? ""),
            Self.bytes(record.playIntegrityVerifiedAt.map { String(Self.unixSeconds($0)) } ?? ""),
        ]
        self.callerConnection.evaluate(
            Self.createKeyScript, keys: [Self.keyRecordKey(record.keyID)], arguments: arguments
        ) {
            completion(
                RedisReplies.interpret($0, command: "EVALSHA create_key") { reply in
                    switch reply {
                    case .integer(1): return .created
                    case .integer(0): return .alreadyExists
                    default: return nil
                    }
                }
            )
        }
    }

    package func fetchKey(keyID: String, completion: @escaping @Sendable (Result<KeyRecord?, StoreError>) -> Void) {
        let key = Self.keyRecordKey(keyID)
        self.callerConnection.send([Self.bytes("HGETALL"), key], key: key) { result in
            switch result {
            case .failure(let error):
                completion(.failure(error))
            case .success(let reply):
                if let error = RedisReplies.serverError(reply, command: "HGETALL") {
                    completion(.failure(error))
                    return
                }
                do throws(StoreError) {
                    completion(.success(try Self.decodeKeyRecord(keyID: keyID, reply: reply)))
                } catch {
                    completion(.failure(error))
                }
            }
        }
    }

    package func recordPlayIntegrityVerdict(
        keyID: String, verdict: String, at time: Date,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        self.callerConnection.evaluate(
            Self.recordPlayIntegrityScript, keys: [Self.keyRecordKey(keyID)],
            arguments: [Self.bytes(verdict), Self.bytes(String(Self.unixSeconds(time)))]
        ) {
            completion(
                RedisReplies.interpret($0, command: "EVALSHA record_play_integrity") { reply in
                    switch reply {
                    case .integer(1): return true
                    case .integer(0): return false
                    default: return nil
                    }
                })
        }
    }

    package func revokeKey(keyID: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        self.callerConnection.evaluate(Self.revokeKeyScript, keys: [Self.keyRecordKey(keyID)], arguments: []) {
            completion(
                RedisReplies.interpret($0, command: "EVALSHA revoke_key") { reply in
                    switch reply {
                    case .integer(1): return true
                    case .integer(0): return false
                    default: return nil
                    }
                }
            )
        }
    }

    /// PING on every connection (the shared router's and each loop's; cluster: every primary of
    /// each): a request can land on any loop, so the store is ready only when all of them
    /// answer. Completes with the first failure, or success once every one answered.
    package func ping(completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        let routers = self.routers
        let outcome = Mutex<(remaining: Int, done: Bool)>((routers.count, false))
        for router in routers {
            router.pingAll { result in
                let finish = outcome.withLock { state -> Bool in
                    guard !state.done else { return false }
                    state.remaining -= 1
                    if case .failure = result {
                        state.done = true
                        return true
                    }
                    state.done = state.remaining == 0
                    return state.done
                }
                if finish { completion(result) }
            }
        }
    }

    // MARK: - Replies

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// Seconds since 1970, rounded down: the resolution of `attested_at`.
    static func unixSeconds(_ date: Date) -> Int64 {
        Int64(date.timeIntervalSince1970.rounded(.down))
    }

    static func decodeKeyRecord(keyID: String, reply: RedisReply) throws(StoreError) -> KeyRecord? {
        guard case .array(let items) = reply, items.count % 2 == 0 else {
            throw StoreError(.protocolError, "unexpected redis reply to HGETALL: \(reply.summary)")
        }
        if items.isEmpty { return nil }
        var fields: [String: [UInt8]] = [:]
        for index in stride(from: 0, to: items.count, by: 2) {
            guard case .bulk(let name) = items[index], case .bulk(let value) = items[index + 1] else {
                throw StoreError(.protocolError, "HGETALL of key \(keyID.prefix(8))… returned a non-string field")
            }
            fields[String(decoding: name, as: UTF8.self)] = value
        }
        func field(_ name: String) throws(StoreError) -> [UInt8] {
            guard let value = fields[name] else {
                throw StoreError(.protocolError, "key record \(keyID.prefix(8))… lacks field \(name)")
            }
            return value
        }
        func text(_ name: String) throws(StoreError) -> String { String(decoding: try field(name), as: UTF8.self) }

        guard let counter = UInt32(try text("counter")) else {
            throw StoreError(.protocolError, "key record \(keyID.prefix(8))… has a non-numeric counter")
        }
        guard let attestedAt = Int64(try text("attested_at")) else {
            throw StoreError(.protocolError, "key record \(keyID.prefix(8))… has a non-numeric attested_at")
        }
        let statusText = try text("status")
        guard let status = KeyStatus(rawValue: statusText) else {
            throw StoreError(
                .protocolError,
                "key record \(keyID.prefix(8))… has unknown status \(statusText.prefix(20))"
            )
        }
        var record = KeyRecord(
            keyID: keyID,
            publicKey: try field("public_key"),
            counter: counter,
            appID: try text("app_id"),
            environment: try text("environment"),
            receipt: fields["receipt"] ?? [],
            attestedAt: Date(timeIntervalSince1970: TimeInterval(attestedAt)),
            status: status,
            validationCategory: try fields["validation_category"].map { bytes throws(StoreError) in
                guard let value = UInt32(String(decoding: bytes, as: UTF8.self)) else {
                    throw StoreError(
                        .protocolError, "key record \(keyID.prefix(8))… has a non-numeric validation_category")
                }
                return value
            },
            bundleVersion: fields["bundle_version"].map { String(decoding: $0, as: UTF8.self) },
            keyAccessPolicy: fields["key_access_policy"].map { String(decoding: $0, as: UTF8.self) }
        )
        record.platform = fields["platform"].map { String(decoding: $0, as: UTF8.self) }
        record.playIntegrityVerdict = fields["pi_verdict"].map { String(decoding: $0, as: UTF8.self) }
        if let seconds = fields["pi_verified_at"] {
            guard let value = Int64(String(decoding: seconds, as: UTF8.self)) else {
                throw StoreError(.protocolError, "key record \(keyID.prefix(8))… has a non-numeric pi_verified_at")
            }
            record.playIntegrityVerifiedAt = Date(timeIntervalSince1970: TimeInterval(value))
        }
        return record
    }
}
