package import PolicyModel
package import RedisClient

/// Builds the store a policy names (`redis:` or `store: memory`).
package enum AttestStoreFactory {
    /// `.memory` → `MemoryStore`; `.redis(url)` → a `RedisStore` that starts connecting now.
    /// Throws when the URL is malformed (the policy loader normally caught that already).
    package static func make(
        _ configuration: StoreConfiguration,
        redis: RedisConfiguration = RedisConfiguration()
    ) throws(RedisURLError) -> any AttestStore {
        switch configuration {
        case .memory:
            return MemoryStore()
        case .redis(let text):
            return RedisStore(url: try RedisURL(parsing: text), configuration: redis)
        }
    }
}
