/// Errors of the Redis Cluster / Sentinel layer (topology and redirects). Each becomes a
/// `StoreError` at the store's edge; `code` is stable (logs, metrics, tests).
package enum RedisClusterError: Error, Hashable, CustomStringConvertible {
    /// A `CLUSTER SHARDS`/`SLOTS` or `SENTINEL` reply that cannot be read.
    case badTopology(String)
    /// No seed node answered a topology query.
    case noSeedAnswered(String)
    /// Redirected more than the bound allows (a resharding storm, or a map that never settles).
    case tooManyRedirects(String)
    /// The slot has no primary (failing over, or not covered).
    case slotUnassigned(Int)
    /// Sentinel named no primary, or the node it named is not one (`ROLE` says replica).
    case noPrimary(String)
    /// No sentinel named a primary, and a sentinel refused us for a reason retrying will not
    /// mend (its certificate is not trusted, or it is not a TLS port): a configuration error,
    /// which fails the start like a data node's (`RedisConnectFailure.isConfiguration`).
    case sentinelsRefused(String)

    package var code: String {
        switch self {
        case .badTopology: return "redis_bad_topology"
        case .noSeedAnswered: return "redis_no_seed_answered"
        case .tooManyRedirects: return "redis_too_many_redirects"
        case .slotUnassigned: return "redis_slot_unassigned"
        case .noPrimary: return "redis_no_primary"
        case .sentinelsRefused: return "redis_sentinels_refused"
        }
    }

    /// Retrying will not mend it: see `RedisConnectFailure.isConfiguration`.
    package var isConfiguration: Bool {
        if case .sentinelsRefused = self { return true }
        return false
    }

    package var description: String {
        switch self {
        case .badTopology(let reason), .noSeedAnswered(let reason), .tooManyRedirects(let reason),
            .noPrimary(let reason), .sentinelsRefused(let reason):
            return "\(self.code): \(reason)"
        case .slotUnassigned(let slot):
            return "\(self.code): slot \(slot) has no primary"
        }
    }

    /// The store error callers see: the cluster cannot serve now (never a protocol error, so
    /// `on_store_error` applies).
    var storeError: StoreError {
        switch self {
        case .badTopology: return StoreError(.protocolError, self.description)
        default: return StoreError(.unavailable, self.description)
        }
    }
}
