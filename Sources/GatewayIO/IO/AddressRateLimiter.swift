import Synchronization

/// Token buckets per client address (`IPAddressBytes.limitKey`): `rate` tokens a second, at most
/// `burst` saved. Guards the anonymous endpoints (challenge, attest), so that one address's
/// flood is refused with 429 while every other address keeps its own full bucket.
///
/// Memory is bounded: at most `capacity` addresses per shard are tracked. When a shard is full,
/// buckets that have refilled completely are dropped first (forgetting them changes nothing);
/// if none has, the shard is cleared, which at worst hands the tracked addresses a fresh burst.
/// Sixteen shards, each behind its own lock, keep loops from contending.
package final class AddressRateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updatedNanoseconds: UInt64
    }

    private final class Shard: Sendable {
        let buckets = Mutex<[String: Bucket]>([:])
    }

    package enum Admission: Equatable, Sendable {
        case allowed
        /// Refused: a token will be there in this many whole seconds (>= 1; `Retry-After`).
        case limited(retryAfterSeconds: Int)
    }

    private static let shardCount = 16
    private let shards: [Shard]
    private let capacityPerShard: Int
    private let settings: Mutex<(rate: Double, burst: Double)>

    package init(ratePerSecond: Int, burst: Int, capacity: Int = 65_536) {
        self.shards = (0..<Self.shardCount).map { _ in Shard() }
        self.capacityPerShard = max(1, capacity / Self.shardCount)
        self.settings = Mutex((Double(max(1, ratePerSecond)), Double(max(1, burst))))
    }

    /// Changes the rate and burst (policy reload); buckets keep their tokens, capped at the new burst.
    package func update(ratePerSecond: Int, burst: Int) {
        self.settings.withLock { $0 = (Double(max(1, ratePerSecond)), Double(max(1, burst))) }
    }

    /// Takes one token from `key`'s bucket if it has one.
    package func admit(_ key: String, nowNanoseconds: UInt64) -> Admission {
        let (rate, burst) = self.settings.withLock { $0 }
        let shard = self.shards[Int(UInt(bitPattern: key.hashValue) % UInt(Self.shardCount))]
        return shard.buckets.withLock { buckets in
            var bucket = buckets[key] ?? Bucket(tokens: burst, updatedNanoseconds: nowNanoseconds)
            let elapsed = Double(nowNanoseconds &- bucket.updatedNanoseconds) / 1e9
            if nowNanoseconds > bucket.updatedNanoseconds {
                bucket.tokens = min(burst, bucket.tokens + elapsed * rate)
                bucket.updatedNanoseconds = nowNanoseconds
            }
            guard bucket.tokens >= 1 else {
                buckets[key] = bucket
                return .limited(retryAfterSeconds: max(1, Int(((1 - bucket.tokens) / rate).rounded(.up))))
            }
            bucket.tokens -= 1
            if buckets[key] == nil && buckets.count >= self.capacityPerShard {
                Self.evict(&buckets, rate: rate, burst: burst, now: nowNanoseconds, capacity: self.capacityPerShard)
            }
            buckets[key] = bucket
            return .allowed
        }
    }

    /// Addresses tracked now (tests, metrics).
    package var trackedAddresses: Int {
        self.shards.reduce(0) { total, shard in total + shard.buckets.withLock { $0.count } }
    }

    private static func evict(
        _ buckets: inout [String: Bucket], rate: Double, burst: Double, now: UInt64, capacity: Int
    ) {
        buckets = buckets.filter { _, bucket in
            bucket.tokens + Double(now &- bucket.updatedNanoseconds) / 1e9 * rate < burst
        }
        if buckets.count >= capacity { buckets.removeAll(keepingCapacity: true) }
    }
}

/// Units (open connections, buffered body bytes) held per client address, each under a cap.
/// Exact: an entry exists only while its address holds something, so the table is bounded by
/// what the process holds anyway (connections, reservations).
package final class AddressLedger: Sendable {
    private final class Shard: Sendable {
        let held = Mutex<[String: Int]>([:])
    }

    private static let shardCount = 16
    private let shards: [Shard] = (0..<AddressLedger.shardCount).map { _ in Shard() }

    package init() {}

    private func shard(_ key: String) -> Shard {
        self.shards[Int(UInt(bitPattern: key.hashValue) % UInt(Self.shardCount))]
    }

    /// Adds `amount` to `key` if its total stays within `limit`; all or nothing.
    package func tryAdd(_ key: String, _ amount: Int, limit: Int) -> Bool {
        precondition(amount >= 0, "negative amount \(amount)")
        if amount == 0 { return true }
        return self.shard(key).held.withLock { held in
            let current = held[key] ?? 0
            guard current <= limit, amount <= limit - current else { return false }
            held[key] = current + amount
            return true
        }
    }

    /// Returns `amount` that an earlier `tryAdd` took.
    package func remove(_ key: String, _ amount: Int) {
        precondition(amount >= 0, "negative amount \(amount)")
        if amount == 0 { return }
        self.shard(key).held.withLock { held in
            let current = held[key] ?? 0
            precondition(current >= amount, "removed \(amount) from \(key) holding \(current)")
            held[key] = current == amount ? nil : current - amount
        }
    }

    /// What `key` holds now.
    package func held(_ key: String) -> Int { self.shard(key).held.withLock { $0[key] ?? 0 } }

    /// Addresses holding anything now.
    package var addressCount: Int { self.shards.reduce(0) { $0 + $1.held.withLock { $0.count } } }
}
