package import RedisClient

/// The fleet's attestation counters: `appattest:fleet:{<app ID>}:<minute>`, one per App ID and
/// minute, kept two minutes. One key per call, so it runs on Redis Cluster as is.
extension RedisStore: AttestationRateCounting {
    static let countAttestationScript = RedisScript(
        """
        local n = redis.call('INCR', KEYS[1])
        if n == 1 then redis.call('EXPIRE', KEYS[1], 120) end
        return n
        """
    )

    static func attestationRateKey(appID: String, minute: Int64) -> [UInt8] {
        Array("appattest:fleet:{\(appID)}:\(minute)".utf8)
    }

    package func countAttestation(
        appID: String, minute: Int64, completion: @escaping @Sendable (Result<Int, StoreError>) -> Void
    ) {
        self.callerConnection.evaluate(
            Self.countAttestationScript, keys: [Self.attestationRateKey(appID: appID, minute: minute)], arguments: []
        ) { reply in
            completion(
                RedisReplies.interpret(reply, command: "EVALSHA count_attestation") { reply -> Int? in
                    guard case .integer(let count) = reply else { return nil }
                    return Int(exactly: count)
                })
        }
    }
}
