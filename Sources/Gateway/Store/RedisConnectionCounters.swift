import Synchronization

/// Live objects of one `RedisConnection`: hiredis contexts (drivers) and commands not yet
/// deallocated. After `close()` both drop to zero once hiredis has let go of everything,
/// which is how the tests check that every `Unmanaged` reference is balanced exactly once
/// (a missed release stays counted; a double release crashes).
package final class RedisConnectionCounters: Sendable {
    private let drivers = Atomic<Int>(0)
    private let commands = Atomic<Int>(0)

    package var liveDrivers: Int { self.drivers.load(ordering: .relaxed) }
    package var liveCommands: Int { self.commands.load(ordering: .relaxed) }

    func driverCreated() { self.drivers.add(1, ordering: .relaxed) }
    func driverDestroyed() { self.drivers.subtract(1, ordering: .relaxed) }
    func commandCreated() { self.commands.add(1, ordering: .relaxed) }
    func commandDestroyed() { self.commands.subtract(1, ordering: .relaxed) }
}
