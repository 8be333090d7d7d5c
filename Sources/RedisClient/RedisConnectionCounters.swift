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
    private let failure = Mutex<RedisConnectFailure?>(nil)

    /// Connected, authenticated and scripts loaded.
    package var isReady: Bool { self.ready.load(ordering: .relaxed) }
    package var liveDrivers: Int { self.drivers.load(ordering: .relaxed) }
    package var liveCommands: Int { self.commands.load(ordering: .relaxed) }
    /// Commands completed with `StoreError.timeout` since start.
    package var commandTimeouts: Int { self.timeouts.load(ordering: .relaxed) }
    /// Connection attempts since start (the first one included).
    package var connectAttempts: Int { self.connects.load(ordering: .relaxed) }

    /// Why the last connect attempt failed; nil once connected (or before any attempt ended).
    package var lastFailure: RedisConnectFailure? { self.failure.withLock { $0 } }

    func setLastFailure(_ value: RedisConnectFailure?) { self.failure.withLock { $0 = value } }
    func setReady(_ value: Bool) { self.ready.store(value, ordering: .relaxed) }
    func driverCreated() { self.drivers.add(1, ordering: .relaxed) }
    func driverDestroyed() { self.drivers.subtract(1, ordering: .relaxed) }
    func commandCreated() { self.commands.add(1, ordering: .relaxed) }
    func commandDestroyed() { self.commands.subtract(1, ordering: .relaxed) }
    func commandTimedOut() { self.timeouts.add(1, ordering: .relaxed) }
    func connectAttempted() { self.connects.add(1, ordering: .relaxed) }
}

/// A failed connect attempt: the reason (endpoint included, never a secret) and whether the
/// server refused us for a reason retrying will not mend: the TLS handshake failed (wrong
/// CA, wrong name, not a TLS port), or a connect-time command was refused (wrong password,
/// unknown ACL user, no such database).
package struct RedisConnectFailure: Sendable, Hashable {
    package var reason: String
    package var isConfiguration: Bool

    package init(reason: String, isConfiguration: Bool) {
        self.reason = reason
        self.isConfiguration = isConfiguration
    }
}
