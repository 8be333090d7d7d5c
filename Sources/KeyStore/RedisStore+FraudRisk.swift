package import AppleClient
package import Foundation
import GatewayIO
package import RedisClient

/// Fraud-risk refresh state in Redis (docs/operations.md "Key layout"):
/// - on the key record `appattest:key:{<keyID>}`: `receipt` is replaced by each verified
///   refreshed receipt; `fraud_risk` holds the `FraudRiskRefresh` state (JSON),
///   `risk_metric` (decimal) and `risk_metric_time` (Unix seconds) the last known metric.
/// - `appattest:fraudrisk:due`: sorted set, member key ID, score the Unix second of its next
///   attempt. The refresher reads the due members (`ZRANGEBYSCORE … LIMIT`).
/// - `appattest:fraudrisk:lease`: string, the refresher that holds the lease (`SET NX PX`):
///   one gateway at a time works the due set, so N gateways refresh a key once.
///
/// The record and the due set live in different cluster slots: saving is two commands, the
/// record first, so a crash between them leaves the key due at its old time (refreshed again
/// once, harmless: Apple answers 304).
extension RedisStore: FraudRiskStore {
    package var fraudRiskState: (any FraudRiskStore)? { self }

    static let fraudRiskDueKey = Array("appattest:fraudrisk:due".utf8)
    static let fraudRiskLeaseKey = Array("appattest:fraudrisk:lease".utf8)

    /// KEYS[1] = lease; ARGV[1] = owner. Deletes the lease only if `owner` holds it.
    static let releaseFraudRiskLeaseScript = RedisScript(
        """
        if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
        return 0
        """
    )

    /// Puts `keyID` in the due set at `time` (a new attestation: at once, or its receipt's not-before).
    package func scheduleFraudRisk(
        keyID: String, at time: Date, completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        let arguments = [
            Self.bytes("ZADD"), Self.fraudRiskDueKey, Self.bytes(String(Self.unixSeconds(time))), Self.bytes(keyID),
        ]
        self.callerConnection.send(arguments, key: Self.fraudRiskDueKey) {
            completion(
                RedisReplies.interpret($0, command: "ZADD") { reply -> Void? in
                    if case .integer = reply { return () }
                    return nil
                })
        }
    }

    /// Takes (or renews, for the same `owner`) the refresher lease for `ttl`; true when held.
    package func claimFraudRiskLease(
        owner: String, ttl: Duration, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        let milliseconds = max(1, ttl.components.seconds * 1000 + ttl.components.attoseconds / 1_000_000_000_000_000)
        let connection = self.callerConnection
        connection.send(
            [
                Self.bytes("SET"), Self.fraudRiskLeaseKey, Self.bytes(owner), Self.bytes("NX"), Self.bytes("PX"),
                Self.bytes(String(milliseconds)),
            ],
            key: Self.fraudRiskLeaseKey
        ) { result in
            let claimed = RedisReplies.interpret(result, command: "SET NX") { reply -> Bool? in
                switch reply {
                case .status: return true
                case .null: return false
                default: return nil
                }
            }
            guard case .success(false) = claimed else {
                completion(claimed)
                return
            }
            // Held already: ours (renew) or another gateway's.
            connection.send([Self.bytes("GET"), Self.fraudRiskLeaseKey], key: Self.fraudRiskLeaseKey) { reply in
                let holder = RedisReplies.interpret(reply, command: "GET") { reply -> [UInt8]? in
                    if case .bulk(let bytes) = reply { return bytes }
                    if case .null = reply { return [] }
                    return nil
                }
                guard case .success(let bytes) = holder, bytes == Self.bytes(owner) else {
                    completion(holder.map { _ in false })
                    return
                }
                connection.send(
                    [Self.bytes("PEXPIRE"), Self.fraudRiskLeaseKey, Self.bytes(String(milliseconds))],
                    key: Self.fraudRiskLeaseKey
                ) { completion(RedisReplies.interpret($0, command: "PEXPIRE") { _ in true }) }
            }
        }
    }

    /// Gives the lease back if `owner` holds it.
    package func releaseFraudRiskLease(
        owner: String, completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        self.callerConnection.evaluate(
            Self.releaseFraudRiskLeaseScript, keys: [Self.fraudRiskLeaseKey], arguments: [Self.bytes(owner)]
        ) { completion(RedisReplies.interpret($0, command: "EVALSHA release_lease") { _ in () }) }
    }

    /// At most `limit` key IDs whose next attempt is at or before `now`, earliest first.
    package func dueFraudRiskKeys(
        now: Date, limit: Int, completion: @escaping @Sendable (Result<[String], StoreError>) -> Void
    ) {
        let arguments = [
            Self.bytes("ZRANGEBYSCORE"), Self.fraudRiskDueKey, Self.bytes("-inf"),
            Self.bytes(String(Self.unixSeconds(now))), Self.bytes("LIMIT"), Self.bytes("0"), Self.bytes(String(limit)),
        ]
        self.callerConnection.send(arguments, key: Self.fraudRiskDueKey) {
            completion(
                RedisReplies.interpret($0, command: "ZRANGEBYSCORE") { reply -> [String]? in
                    guard case .array(let items) = reply else { return nil }
                    var keys: [String] = []
                    for item in items {
                        guard case .bulk(let bytes) = item else { return nil }
                        keys.append(String(decoding: bytes, as: UTF8.self))
                    }
                    return keys
                })
        }
    }

    /// The stored refresh state of `keyID`, nil when none was saved yet.
    package func fetchFraudRisk(
        keyID: String, completion: @escaping @Sendable (Result<FraudRiskRefresh?, StoreError>) -> Void
    ) {
        let key = Self.keyRecordKey(keyID)
        self.callerConnection.send([Self.bytes("HGET"), key, Self.bytes("fraud_risk")], key: key) {
            completion(
                RedisReplies.interpret($0, command: "HGET") { reply -> FraudRiskRefresh?? in
                    switch reply {
                    case .null: return .some(nil)
                    case .bulk(let bytes):
                        guard let state = try? JSONDecoder().decode(FraudRiskRefresh.self, from: Data(bytes)) else {
                            return nil
                        }
                        return .some(state)
                    default: return nil
                    }
                })
        }
    }

    /// Saves `state` (and `receipt` when a new one was verified) on the record, only while the
    /// record exists, then moves the key in the due set to `state.nextAttempt` (out of it
    /// while halted).
    ///
    /// `schedule` false (attest time with refreshes off): the state is saved, the due set is
    /// left alone.
    package func saveFraudRisk(
        keyID: String, state: FraudRiskRefresh, receipt: [UInt8]?, schedule: Bool = true,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        let key = Self.keyRecordKey(keyID)
        let json = (try? JSONEncoder().encode(state)).map { [UInt8]($0) } ?? []
        var arguments: [[UInt8]] = [json]
        arguments.append(Self.bytes(state.riskMetric.map(String.init) ?? ""))
        arguments.append(Self.bytes(state.riskMetricTime.map { String(Self.unixSeconds($0)) } ?? ""))
        arguments.append(receipt ?? [])
        arguments.append(Self.bytes(state.nextAttempt.map { String(Self.unixSeconds($0)) } ?? ""))
        let connection = self.callerConnection
        connection.evaluate(Self.saveFraudRiskScript, keys: [key], arguments: arguments) { result in
            let saved = RedisReplies.interpret(result, command: "EVALSHA save_fraud_risk") { reply -> Bool? in
                if case .integer(let n) = reply { return n == 1 }
                return nil
            }
            guard case .success(let exists) = saved, schedule else {
                completion(saved.map { _ in () })
                return
            }
            var due: [[UInt8]]
            if exists, let next = state.nextAttempt {
                due = [
                    Self.bytes("ZADD"), Self.fraudRiskDueKey, Self.bytes(String(Self.unixSeconds(next))),
                    Self.bytes(keyID),
                ]
            } else {
                due = [Self.bytes("ZREM"), Self.fraudRiskDueKey, Self.bytes(keyID)]
            }
            connection.send(due, key: Self.fraudRiskDueKey) {
                completion(RedisReplies.interpret($0, command: "ZADD") { _ in () })
            }
        }
    }

    /// KEYS[1] = record; ARGV = state JSON, risk metric, its time, new receipt (empty: keep),
    /// next attempt (Unix seconds; empty while halted). The next attempt is copied to
    /// `risk_next`, which the counter script compares with the request's time (lazy refresh).
    /// Returns 0 when the record is gone (revoked and expired, or deleted), 1 when saved.
    static let saveFraudRiskScript = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
        redis.call('HSET', KEYS[1], 'fraud_risk', ARGV[1])
        if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'risk_metric', ARGV[2], 'risk_metric_time', ARGV[3]) end
        if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'receipt', ARGV[4]) end
        if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'risk_next', ARGV[5])
        else redis.call('HDEL', KEYS[1], 'risk_next') end
        return 1
        """
    )

    /// Lazy refresh: makes `keyID` due now unless it is due sooner already (`ZADD LT`; adds
    /// it when absent: a key attested before refreshes were enabled, or halted). One command,
    /// fire and forget from the request path: a failure only delays the refresh to the sweep.
    package func wakeFraudRisk(keyID: String, now: Date) {
        let arguments = [
            Self.bytes("ZADD"), Self.fraudRiskDueKey, Self.bytes("LT"), Self.bytes(String(Self.unixSeconds(now))),
            Self.bytes(keyID),
        ]
        self.callerConnection.send(arguments, key: Self.fraudRiskDueKey) { result in
            if case .failure(let error) = RedisReplies.interpret(result, command: "ZADD LT", { _ in () }) {
                Log.warning(
                    "fraud_risk_wake_failed",
                    [("key_id_prefix", String(keyID.prefix(8))), ("error", error.description)])
            }
        }
    }
}
