package import Foundation
package import RedisClient

/// Where a fleet of gateways keeps one copy of the status list, so that one gateway's fetch
/// serves every other: the JSON as fetched and its fetch time. A `RedisConnection` in serve
/// (`AndroidRevocationRedisShare`); any value in tests.
package protocol AndroidRevocationShare: Sendable {
    /// The copy there is (nil: none); `completion` on any queue.
    func load(completion: @escaping @Sendable (Result<AndroidRevocationSharedCopy?, StoreError>) -> Void)
    /// Replaces the copy; it expires after `ttl` (the list's `max_age`: nobody may use it later).
    func save(
        _ copy: AndroidRevocationSharedCopy, ttl: Duration,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void)
}

/// The fleet's copy: `agrl1 <fetch time, Unix ms>\n` then the JSON as Google sent it.
package struct AndroidRevocationSharedCopy: Sendable, Equatable {
    package static let magic = Array("agrl1 ".utf8)
    /// Largest value read back (the list's bound plus the header).
    package static let maximumBytes = 32 * 1024 * 1024 + 64

    package var fetchedAt: Date
    package var json: [UInt8]

    package init(fetchedAt: Date, json: [UInt8]) {
        self.fetchedAt = fetchedAt
        self.json = json
    }

    package var encoded: [UInt8] {
        let millis = Int64((self.fetchedAt.timeIntervalSince1970 * 1000).rounded(.down))
        return Self.magic + Array("\(millis)\n".utf8) + self.json
    }

    /// nil when the value is not such a copy (another program's key, a newer format).
    package init?(decoding bytes: [UInt8]) {
        guard bytes.count <= Self.maximumBytes, bytes.starts(with: Self.magic) else { return nil }
        let rest = bytes[Self.magic.count...]
        guard let newline = rest.prefix(21).firstIndex(of: 0x0A) else { return nil }
        let digits = rest[rest.startIndex..<newline]
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let millis = Int64(String(decoding: digits, as: UTF8.self))
        else { return nil }
        self.fetchedAt = Date(timeIntervalSince1970: Double(millis) / 1000)
        self.json = Array(rest[(newline + 1)...])
    }
}

/// The fleet's copy in one Redis key (`GET`, `SET … PX`) over a connection of its own.
package final class AndroidRevocationRedisShare: AndroidRevocationShare {
    /// The key every gateway of a store reads and writes.
    package static let defaultKey = "attest-gateway:android:revocation-list"

    package let connection: RedisConnection
    package let key: String

    package init(connection: RedisConnection, key: String = AndroidRevocationRedisShare.defaultKey) {
        self.connection = connection
        self.key = key
    }

    package func load(completion: @escaping @Sendable (Result<AndroidRevocationSharedCopy?, StoreError>) -> Void) {
        self.connection.send([Array("GET".utf8), Array(self.key.utf8)]) { result in
            switch result {
            case .failure(let error): completion(.failure(error))
            case .success(.null): completion(.success(nil))
            case .success(.bulk(let bytes)):
                guard let copy = AndroidRevocationSharedCopy(decoding: bytes) else {
                    completion(.failure(StoreError(.protocolError, "the shared revocation list is not a list copy")))
                    return
                }
                completion(.success(copy))
            case .success(let other):
                completion(.failure(StoreError(.protocolError, "GET of the shared revocation list answered \(other)")))
            }
        }
    }

    package func save(
        _ copy: AndroidRevocationSharedCopy, ttl: Duration,
        completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        let milliseconds = max(1000, ttl.components.seconds * 1000)
        self.connection.send(
            [Array("SET".utf8), Array(self.key.utf8), copy.encoded, Array("PX".utf8), Array(String(milliseconds).utf8)]
        ) { result in
            switch result {
            case .failure(let error): completion(.failure(error))
            case .success(.status): completion(.success(()))
            case .success(let other):
                completion(.failure(StoreError(.protocolError, "SET of the shared revocation list answered \(other)")))
            }
        }
    }
}
