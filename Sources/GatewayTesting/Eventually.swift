// The one `eventually` of the tests: polls a condition until it holds or a timeout passes. For
// tests that wait on other threads or processes, and for the unit tests of the in-memory proxy
// (`InMemoryHTTPPeer`), whose loop runs on its own thread; the timeout bounds a hang, it never
// asserts a speed.
import Glibc

/// Polls `condition` every `interval` until it is true or `timeout` has passed, then checks it a
/// last time. Blocks the calling thread between polls.
@discardableResult
package func eventually(
    timeout: Duration = .seconds(5), interval: Duration = .milliseconds(20), _ condition: () throws -> Bool
) rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        usleep(microseconds(interval))
    }
    return try condition()
}

/// The same for an async condition: sleeps the task, not the thread, between polls.
@discardableResult
package func eventually(
    timeout: Duration = .seconds(5), interval: Duration = .milliseconds(20), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return try await condition()
}

private func microseconds(_ duration: Duration) -> UInt32 {
    let (seconds, attoseconds) = duration.components
    return UInt32(seconds * 1_000_000 + attoseconds / 1_000_000_000_000)
}
