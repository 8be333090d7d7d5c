import Foundation
package import GatewayIO
import Synchronization

/// Loops for tests that drive a gate or a store the way a connection does, without a server.
package enum TestEventLoop {
    private static let loops: [EventLoop] = (0..<max(2, ProcessInfo.processInfo.activeProcessorCount)).map { index in
        do {
            return try EventLoop(index: 90 + index)
        } catch {
            preconditionFailure("no test event loop: \(error)")
        }
    }
    private static let turn = Atomic<Int>(0)

    /// One of the process's test loops, in turn, so that tests running in parallel do not queue
    /// behind one loop.
    package static func next() -> EventLoop {
        let (turn, _) = Self.turn.add(1, ordering: .relaxed)
        return Self.loops[turn % Self.loops.count]
    }
}
