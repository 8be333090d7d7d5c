package import Foundation
import PolicyModel
package import RedisClient

/// The counter: the script that advances a key's counter (with its window, idle TTL and the
/// fraud-risk fields read in the same round trip) and the store calls that run it.
extension RedisStore {
    /// KEYS[1] = record; ARGV[1] = proposed counter, ARGV[2] = window N (0 = strict), ARGV[3] =
    /// idle TTL in ms (`0`: none), [4] now in Unix seconds for the lazy fraud-risk refresh
    /// ('' = off), [5] its quiet period in seconds. Returns {1, metric, metric time, due}
    /// advanced, {2, metric, metric time, due} accepted out of order (inside the window, never
    /// seen; metric and time '' when unknown; due 1 when `risk_next` is absent or past, in
    /// which case `risk_next` moves to now + quiet period so that only one request per
    /// period asks the caller to wake the refresh), {0, stored} refused (not increasing, or seen / below the window),
    /// and only an accepted counter moves `risk_next`: a replay, which anyone who saw one
    /// request can send, must not push the key's refresh back period after period,
    /// {-1} unknown key, {-2} revoked, {-3} stored counter unreadable. The window's seen-map
    /// (`CounterWindow`, field `seen`) is read and written in this same script, so N concurrent
    /// copies of one counter let exactly one through. Strict mode drops a stale map (its
    /// positions then count as seen). An accepted counter renews the idle TTL (`key_idle_ttl`)
    /// in the same round trip; a refused one (replay) does not.
    ///
    /// Per-key limits (`key_limits`, `KeyLimitLedger` is the same arithmetic in Swift): [6] the
    /// route's name ('' or absent: no limits), [7] the token interval in microseconds (0: no
    /// bucket), [8] the burst, [9] the daily quota (0: none). Their state lives in the key's own
    /// record (fields `limit_tat:<route>`, `limit_day:<route>` = "<UTC day>:<count>"), so the
    /// script still touches one key in one hash slot. They are charged only once the counter
    /// would pass, and refuse with {-4, 1 rate | 2 daily quota, retry-after seconds} before
    /// anything is written: a replay spends no token of the genuine device, and a limited
    /// request leaves its counter unused. The clock is the primary's `TIME` (one clock per key
    /// whatever gateway asks; docs/design-notes.md "Per-key limits").
    static let advanceCounterScript = RedisScript(
        """
        local route = ARGV[6] or ''
        local tf, df = 'limit_tat:' .. route, 'limit_day:' .. route
        local v
        if route == '' then
          v = redis.call('HMGET', KEYS[1], 'counter', 'status', 'seen', 'risk_metric', 'risk_metric_time', 'risk_next')
        else
          v = redis.call('HMGET', KEYS[1], 'counter', 'status', 'seen', 'risk_metric', 'risk_metric_time', 'risk_next', tf, df)
        end
        if not v[1] then return {-1} end
        if v[2] == 'revoked' then return {-2} end
        local h = tonumber(v[1])
        if h == nil then return {-3} end
        local function accepted(code)
          local due = 0
          local now = tonumber(ARGV[4] or '')
          if now then
            local nxt = tonumber(v[6] or '')
            if nxt == nil or nxt <= now then
              due = 1
              redis.call('HSET', KEYS[1], 'risk_next', tostring(now + tonumber(ARGV[5])))
            end
          end
          return {code, v[4] or '', v[5] or '', due}
        end
        local lw = {}
        local function limited()
          if route == '' then return nil end
          local tm = redis.call('TIME')
          local sec = tonumber(tm[1])
          local now = sec * 1000000 + tonumber(tm[2])
          local interval, burst, quota = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
          if quota > 0 then
            local day = math.floor(sec / 86400)
            local used = 0
            local d, k = string.match(v[8] or '', '^(%d+):(%d+)$')
            if d and tonumber(d) == day then used = tonumber(k) end
            if used >= quota then return {-4, 2, 86400 - sec % 86400} end
            lw[#lw + 1] = df
            lw[#lw + 1] = string.format('%.0f:%.0f', day, used + 1)
          end
          if interval > 0 then
            local tat = tonumber(v[7] or '') or now
            if tat < now then tat = now end
            local arrival = tat + interval
            local allowed = arrival - burst * interval
            if allowed > now then return {-4, 1, math.ceil((allowed - now) / 1000000)} end
            lw[#lw + 1] = tf
            lw[#lw + 1] = string.format('%.0f', arrival)
          end
          return nil
        end
        local c = tonumber(ARGV[1])
        local n = tonumber(ARGV[2])
        local t = tonumber(ARGV[3]) or 0
        if n == 0 then
          if h >= c then return {0, h} end
          local refused = limited()
          if refused then return refused end
          redis.call('HSET', KEYS[1], 'counter', ARGV[1], unpack(lw))
          if v[3] then redis.call('HDEL', KEYS[1], 'seen') end
          if t > 0 then redis.call('PEXPIRE', KEYS[1], t) end
          return accepted(1)
        end
        local s = v[3] or ''
        local len = string.len(s)
        if len < n then s = s .. string.rep('1', n - len) elseif len > n then s = string.sub(s, 1, n) end
        if c > h then
          local d = c - h
          if d >= n then s = '1' .. string.rep('0', n - 1)
          else s = '1' .. string.rep('0', d - 1) .. string.sub(s, 1, n - d) end
          local refused = limited()
          if refused then return refused end
          redis.call('HSET', KEYS[1], 'counter', ARGV[1], 'seen', s, unpack(lw))
          if t > 0 then redis.call('PEXPIRE', KEYS[1], t) end
          return accepted(1)
        end
        if c < 1 or c <= h - n then return {0, h} end
        local i = h - c + 1
        if string.sub(s, i, i) ~= '0' then return {0, h} end
        local refused = limited()
        if refused then return refused end
        redis.call('HSET', KEYS[1], 'seen', string.sub(s, 1, i - 1) .. '1' .. string.sub(s, i + 1), unpack(lw))
        if t > 0 then redis.call('PEXPIRE', KEYS[1], t) end
        return accepted(2)
        """
    )

    package func advanceCounter(
        keyID: String,
        to newCounter: UInt32,
        window: Int,
        completion: @escaping @Sendable (Result<CounterAdvance, StoreError>) -> Void
    ) {
        self.advanceCounterReadingRisk(
            keyID: keyID, to: newCounter, window: window, lazyRefreshAt: nil, limits: nil
        ) {
            completion($0.map(\.advance))
        }
    }

    package func advanceCounterReadingRisk(
        keyID: String,
        to newCounter: UInt32,
        window: Int,
        lazyRefreshAt: Date?,
        limits: KeyLimitCharge?,
        completion: @escaping @Sendable (Result<CounterAdvanceReading, StoreError>) -> Void
    ) {
        let key = Self.keyRecordKey(keyID)
        let router = self.callerConnection
        var arguments = [
            RESPWriter.decimalBytes(Int(newCounter)), RESPWriter.decimalBytes(max(0, window)),
            self.idleTTLArgument,
            lazyRefreshAt.map { RESPWriter.decimalBytes(Int(Self.unixSeconds($0))) } ?? [],
            Self.lazyRefreshQuietArgument,
        ]
        if let limits { arguments += Self.limitArguments(limits) }
        router.evaluate(
            Self.advanceCounterScript,
            keys: [key],
            arguments: arguments
        ) { [waitArguments = self.waitArguments] reply in
            let result = RedisReplies.interpret(reply, command: "EVALSHA advance_counter", Self.decodeAdvance)
            // counter_durability: replica: an advance counts once a replica has it, so that a
            // failover cannot bring the old counter back (and the used assertion with it).
            // An out-of-order acceptance wrote the seen-map: it must be as durable as an advance.
            guard let waitArguments, case .success(let accepted) = result,
                accepted.advance == .advanced || accepted.advance == .acceptedOutOfOrder
            else {
                completion(result)
                return
            }
            router.send(waitArguments, key: key) { reply in
                completion(
                    RedisReplies.interpret(reply, command: "WAIT") { reply -> CounterAdvanceReading? in
                        guard case .integer(let replicas) = reply else { return nil }
                        return replicas >= 1 ? accepted : nil
                    }.flatMapError { error in
                        guard error.kind == .protocolError, case .success(.integer(0)) = reply else {
                            return .failure(error)
                        }
                        return .failure(
                            StoreError(
                                .unavailable,
                                "no replica acknowledged the counter advance within \(String(decoding: waitArguments[2], as: UTF8.self)) ms (counter_durability: replica)"
                            ))
                    })
            }
        }
    }

    /// The counter script's reply, with the key's fraud-risk fields when it accepted.
    static func decodeAdvance(_ reply: RedisReply) -> CounterAdvanceReading? {
        guard case .array(let items) = reply, case .integer(let code)? = items.first else { return nil }
        switch (code, items.count) {
        case (1, 4), (2, 4):
            guard let risk = Self.decodeRisk(items[1...]) else { return nil }
            return CounterAdvanceReading(advance: code == 1 ? .advanced : .acceptedOutOfOrder, risk: risk)
        case (0, 2):
            guard case .integer(let stored) = items[1], let stored = UInt32(exactly: stored) else { return nil }
            return CounterAdvanceReading(advance: .notIncreasing(stored: stored), risk: .unknown)
        case (-4, 3):
            guard case .integer(let which) = items[1], case .integer(let seconds) = items[2],
                let limit: KeyLimitKind = which == 1 ? .rate : which == 2 ? .dailyQuota : nil
            else { return nil }
            let refusal = KeyLimitRefusal(limit: limit, retryAfterSeconds: max(1, Int(seconds)))
            return CounterAdvanceReading(advance: .limited(refusal), risk: .unknown)
        case (-1, 1): return CounterAdvanceReading(advance: .unknownKey, risk: .unknown)
        case (-2, 1): return CounterAdvanceReading(advance: .revoked, risk: .unknown)
        default: return nil
        }
    }

    /// Arguments [6]-[9] of the counter script: the route's name, token interval (µs), burst
    /// and daily quota (0 for an absent bucket or quota).
    static func limitArguments(_ charge: KeyLimitCharge) -> [[UInt8]] {
        let limits = charge.limits
        return [
            Array(charge.route.utf8),
            RESPWriter.decimalBytes(Int(limits.rate?.emissionIntervalMicroseconds ?? 0)),
            RESPWriter.decimalBytes(limits.burst),
            RESPWriter.decimalBytes(limits.dailyQuota ?? 0),
        ]
    }

    /// Seconds between two lazy-refresh wake-ups of one key (the counter script's quiet period).
    static let lazyRefreshQuietSeconds = 300
    static let lazyRefreshQuietArgument = RESPWriter.decimalBytes(RedisStore.lazyRefreshQuietSeconds)

    /// {metric, metric time, due} of the counter script: '' for unknown.
    static func decodeRisk(_ items: ArraySlice<RedisReply>) -> KeyRiskReading? {
        guard items.count == 3, case .bulk(let metricBytes) = items[items.startIndex],
            case .bulk(let timeBytes) = items[items.startIndex + 1],
            case .integer(let due) = items[items.startIndex + 2]
        else { return nil }
        // '' (no receipt yet, most keys) decides without a String: `String(decoding:as:)` looks
        // up generic metadata at run time (~320 instructions a call, callgrind).
        let metric = metricBytes.isEmpty ? nil : Int(String(decoding: metricBytes, as: UTF8.self))
        let time =
            timeBytes.isEmpty
            ? nil
            : Int64(String(decoding: timeBytes, as: UTF8.self)).map { Date(timeIntervalSince1970: TimeInterval($0)) }
        return KeyRiskReading(metric: metric, metricTime: metric == nil ? nil : time, refreshDue: due == 1)
    }
}
