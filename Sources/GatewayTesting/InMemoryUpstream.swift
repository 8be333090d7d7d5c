import GatewayIO
package import HTTPProxy
import Synchronization

/// An upstream that lives in the test: the pool's `transportFactory` opens an
/// `InMemoryStreamEnd` pair per connection, keeps one end for the pool and queues the other,
/// which the test takes with `accept` and plays the upstream on.
package final class InMemoryUpstream: Sendable {
    private let capacity: Int
    private let pending = Mutex<[InMemoryStreamEnd]>([])
    private let opened = Atomic<Int>(0)

    /// `capacity`: the unread bytes each direction of a connection holds at most.
    package init(capacity: Int = 4 * 1024 * 1024) {
        self.capacity = capacity
    }

    /// For `UpstreamTarget(transportFactory:)`.
    package var transportFactory: UpstreamTransportFactory {
        { [self] _ throws(IOError) in
            let (pool, test) = try InMemoryStreamEnd.pair(capacity: self.capacity)
            self.pending.withLock { $0.append(test) }
            self.opened.add(1, ordering: .relaxed)
            return pool
        }
    }

    /// Connections the pool has opened so far.
    package var connectionCount: Int { self.opened.load(ordering: .relaxed) }

    /// The next connection the pool opened (waiting for it); nil when none came.
    package func accept() async -> InMemoryHTTPPeer? {
        var end: InMemoryStreamEnd?
        await eventually(timeout: InMemoryHTTPPeer.patience, interval: .milliseconds(1)) { () async -> Bool in
            end = self.pending.withLock { $0.isEmpty ? nil : $0.removeFirst() }
            return end != nil
        }
        return end.map(InMemoryHTTPPeer.init)
    }
}
