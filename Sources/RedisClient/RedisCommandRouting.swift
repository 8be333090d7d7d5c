import Dispatch
package import GatewayIO

/// Where `RedisStore` sends a command: one node (`RedisConnection`), or a Redis Cluster
/// (`RedisClusterClient`, which picks the node by the key's slot and follows redirects).
///
/// Same contract as `RedisConnection.send`: `completion` runs exactly once, on `queue`; an
/// error reply is a `.success(.error)`.
package protocol RedisCommandRouting: AnyObject, Sendable {
    var queue: WorkQueue { get }
    /// Every connection the router holds now (metrics, readiness, tests).
    var allConnections: [RedisConnection] { get }
    /// Connected, and (cluster) every slot has a primary.
    var isReady: Bool { get }

    /// Sends a command whose keys all hash to `key`'s slot (nil: any node).
    func send(
        _ arguments: [[UInt8]], key: [UInt8]?, completion: @escaping @Sendable (Result<RedisReply, StoreError>) -> Void)

    /// `EVALSHA` of `script` (loaded again on `NOSCRIPT`); routed by `keys[0]`.
    func evaluate(
        _ script: RedisScript, keys: [[UInt8]], arguments: [[UInt8]],
        completion: @escaping @Sendable (Result<RedisReply, StoreError>) -> Void)

    /// One connection per primary holding data (one node: itself; cluster: every primary in
    /// the slot map), for commands that must visit every node (`SCAN`). Runs `body` on `queue`.
    func withPrimaryConnections(_ body: @escaping @Sendable ([RedisConnection]) -> Void)

    /// `PING` every node the router uses; completes with the first failure, else success.
    func pingAll(completion: @escaping @Sendable (Result<Void, StoreError>) -> Void)

    func close(completion: (@Sendable () -> Void)?)
}

extension RedisConnection: RedisCommandRouting {
    package var allConnections: [RedisConnection] { [self] }
    package var isReady: Bool { self.counters.isReady }

    package func send(
        _ arguments: [[UInt8]], key: [UInt8]?, completion: @escaping @Sendable (Result<RedisReply, StoreError>) -> Void
    ) {
        self.send(arguments, completion: completion)
    }

    package func withPrimaryConnections(_ body: @escaping @Sendable ([RedisConnection]) -> Void) {
        self.queue.async { body([self]) }
    }

    package func pingAll(completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        self.send([Array("PING".utf8)]) { result in
            completion(RedisReplies.interpretPing(result))
        }
    }
}
