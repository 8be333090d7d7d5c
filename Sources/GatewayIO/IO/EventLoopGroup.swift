package import Dispatch

/// Debug builds check queue confinement at entry points (release builds skip the check): the
/// one confinement check, for event loops (`EventLoop.assertInLoop`) and for the Redis clients'
/// own queues.
@inline(__always)
package func assertOnQueue(_ queue: DispatchQueue) {
    #if DEBUG
        dispatchPrecondition(condition: .onQueue(queue))
    #endif
}

/// The fixed set of loops (about one per core) that connections are spread over.
package final class EventLoopGroup: Sendable {
    package let loops: [EventLoop]
    private let nextIndex = AtomicCounter()

    package init(count: Int) throws(IOError) {
        var loops: [EventLoop] = []
        for i in 0..<max(1, count) {
            loops.append(try EventLoop(index: i))
        }
        self.loops = loops
    }

    /// Round-robin.
    package func next() -> EventLoop {
        self.loops[Int(self.nextIndex.increment() % UInt64(self.loops.count))]
    }

    /// Closes every loop on its own queue; `completion` runs when all are closed.
    package func close(completion: @escaping @Sendable () -> Void) {
        let group = DispatchGroup()
        for loop in self.loops {
            group.enter()
            loop.execute {
                loop.close()
                group.leave()
            }
        }
        group.notify(queue: .global(), execute: completion)
    }
}

/// `assertOnQueue` for a `WorkQueue` (a loop or a serial queue).
@inline(__always)
package func assertOnQueue(_ queue: WorkQueue) {
    queue.assertOn()
}
