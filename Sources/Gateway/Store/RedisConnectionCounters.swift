import Synchronization

/// What one `RedisConnection` reports without a round trip: readiness for `/readyz`, event
/// counts for `/metrics`, and the live socket drivers and commands not yet deallocated.
/// After `close()` the live counts drop to zero once every socket, Dispatch source and
/// completion has let go, which is how the tests check for reference cycles and leaks.
package final class RedisConnectionCounters: Sendable {
    private let ready = Atomic<Bool>(false)
    private let drivers = Atomic<Int>(0)
    private let commands = Atomic<Int>(0)
    private let timeouts = Atomic<Int>(0)
    private let connects = Atomic<Int>(0)

    /// Connected, authenticated and scripts loaded.
    package var isReady: Bool { self.ready.load(ordering: .relaxed) }
    package var liveDrivers: Int { self.drivers.load(ordering: .relaxed) }
    package var liveCommands: Int { self.commands.load(ordering: .relaxed) }
    /// Commands completed with `StoreError.timeout` since start.
    package var commandTimeouts: Int { self.timeouts.load(ordering: .relaxed) }
    /// Connection attempts since start (the first one included).
    package var connectAttempts: Int { self.connects.load(ordering: .relaxed) }

    func setReady(_ value: Bool) { self.ready.store(value, ordering: .relaxed) }
    func driverCreated() { self.drivers.add(1, ordering: .relaxed) }
    func driverDestroyed() { self.drivers.subtract(1, ordering: .relaxed) }
    func commandCreated() { self.commands.add(1, ordering: .relaxed) }
    func commandDestroyed() { self.commands.subtract(1, ordering: .relaxed) }
    func commandTimedOut() { self.timeouts.add(1, ordering: .relaxed) }
    func connectAttempted() { self.connects.add(1, ordering: .relaxed) }
}
