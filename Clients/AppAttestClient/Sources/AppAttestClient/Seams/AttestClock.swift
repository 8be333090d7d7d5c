import Foundation

/// Time, for backoff and cache expiry: `SystemAttestClock` in apps, a recording clock in tests.
public protocol AttestClock: Sendable {
    func now() -> Date
    /// Waits `duration`; throws `CancellationError` when the task is cancelled.
    func sleep(for duration: Duration) async throws
}

/// The wall clock and `Task.sleep`.
public struct SystemAttestClock: AttestClock {
    public init() {}
    public func now() -> Date { Date() }
    public func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
}
