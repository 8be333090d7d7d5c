import Dispatch

/// Resolves host names off the event loops and connection queues: `getaddrinfo` blocks (a slow
/// or unreachable DNS server holds it for seconds), so each lookup runs on the resolver's own
/// serial queue, one at a time, and `completion` runs there too: the caller hops back to its
/// own queue (`loop.execute`, `queue.async`) and checks there whether the answer is still wanted.
///
/// One resolver per client family (Apple's hosts, Redis nodes), so a slow name of one never
/// delays the other's lookups.
package final class HostResolver: Sendable {
    /// The lookup itself; `SocketAddress.resolve` (getaddrinfo) unless a test slows it down.
    package typealias Lookup = @Sendable (_ host: String, _ port: UInt16) throws(IOError) -> SocketAddress

    private let queue: DispatchQueue
    private let lookup: Lookup

    package init(
        label: String,
        lookup: @escaping Lookup = { host, port throws(IOError) in try SocketAddress.resolve(host: host, port: port) }
    ) {
        self.queue = DispatchQueue(label: label)
        self.lookup = lookup
    }

    /// Looks `host` up on the resolver's queue; `completion` runs on that queue.
    package func resolve(
        host: String,
        port: UInt16,
        completion: @escaping @Sendable (Result<SocketAddress, IOError>) -> Void
    ) {
        let lookup = self.lookup
        self.queue.async {
            completion(Result { () throws(IOError) in try lookup(host, port) })
        }
    }
}
