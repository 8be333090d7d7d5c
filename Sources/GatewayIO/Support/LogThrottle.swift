import Dispatch
import Synchronization

/// At most one log line per interval for a repeating condition (a store outage fails every
/// request: one line per request would flood the log and cost CPU when it hurts most).
/// Lock-free; callable from any queue.
package final class LogThrottle: Sendable {
    private let intervalNanoseconds: UInt64
    private let nextAllowed = Atomic<UInt64>(0)
    private let suppressed = Atomic<Int>(0)

    package init(interval: Duration = .seconds(1)) {
        let (seconds, attoseconds) = interval.components
        self.intervalNanoseconds = UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }

    /// nil when this occurrence should not be logged; else how many were suppressed since
    /// the last logged one.
    package func admit(nowNanoseconds: UInt64 = DispatchTime.now().uptimeNanoseconds) -> Int? {
        let next = self.nextAllowed.load(ordering: .relaxed)
        if nowNanoseconds >= next {
            let (exchanged, _) = self.nextAllowed.compareExchange(
                expected: next,
                desired: nowNanoseconds + self.intervalNanoseconds,
                ordering: .relaxed
            )
            if exchanged {
                return self.suppressed.exchange(0, ordering: .relaxed)
            }
        }
        self.suppressed.add(1, ordering: .relaxed)
        return nil
    }
}
