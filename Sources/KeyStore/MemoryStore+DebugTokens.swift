package import Foundation
package import RedisClient
import Synchronization

extension MemoryStore {
    package func createDebugToken(
        _ record: DebugTokenRecord, digest: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        let created = self.state.withLock { state -> Bool in
            guard state.debugTokenNames[record.name] == nil else { return false }
            state.debugTokenNames[record.name] = digest
            state.debugTokens[digest] = Self.wholeSeconds(record)
            return true
        }
        completion(.success(created))
    }

    package func useDebugToken(
        digest: String, now: Date, completion: @escaping @Sendable (Result<DebugTokenUse, StoreError>) -> Void
    ) {
        let use = self.state.withLock { state -> DebugTokenUse in
            guard var record = state.debugTokens[digest] else { return .unknown }
            if record.isExpired(at: now) { return .expired(name: record.name) }
            record.lastUsedAt = Date(timeIntervalSince1970: TimeInterval(RedisStore.unixSeconds(now)))
            state.debugTokens[digest] = record
            return .accepted(name: record.name)
        }
        completion(.success(use))
    }

    package func listDebugTokens(completion: @escaping @Sendable (Result<[DebugTokenRecord], StoreError>) -> Void) {
        let records = self.state.withLock { state in state.debugTokens.values.sorted { $0.name < $1.name } }
        completion(.success(records))
    }

    package func revokeDebugToken(name: String, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        let revoked = self.state.withLock { state -> Bool in
            guard let digest = state.debugTokenNames.removeValue(forKey: name) else { return false }
            state.debugTokens[digest] = nil
            return true
        }
        completion(.success(revoked))
    }

    /// Times kept at whole seconds, as `RedisStore` keeps them.
    private static func wholeSeconds(_ record: DebugTokenRecord) -> DebugTokenRecord {
        func cut(_ date: Date) -> Date { Date(timeIntervalSince1970: TimeInterval(RedisStore.unixSeconds(date))) }
        var record = record
        record.createdAt = cut(record.createdAt)
        record.expiresAt = cut(record.expiresAt)
        record.lastUsedAt = record.lastUsedAt.map(cut)
        return record
    }
}
