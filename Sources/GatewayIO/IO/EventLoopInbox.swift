private import CGatewayShims
import Glibc
import Synchronization

/// Work handed to an `EventLoop`, and the `eventfd` that wakes the loop when it is parked in
/// `epoll_wait`.
///
/// The rule that makes a wake-up impossible to lose: the loop says it is parked (under the
/// lock) only after seeing the inbox empty (under the same lock), and a submitter that finds it
/// parked writes the eventfd once. The eventfd sits in the loop's epoll set level-triggered, so
/// a write that lands while the loop is busy is still reported by its next wait. Submitting
/// while the loop runs (its own callbacks, or another thread while it is busy) costs no syscall.
final class EventLoopInbox: Sendable {
    private struct State {
        var work: [@Sendable () -> Void] = []
        /// The loop is in (or about to enter) an `epoll_wait` with a timeout.
        var isParked = false
        /// The eventfd was (or is being) written and the loop has not read it yet.
        var isWakePending = false
        /// The loop stopped: work goes straight to its Dispatch queue.
        var isStopped = false
    }

    enum Submission {
        case queued
        /// The loop has stopped: run the work elsewhere.
        case stopped
    }

    private let state = Mutex(State())
    let wakeFD: Int32

    init() throws(IOError) {
        let fd = CGatewayShims_eventfd()
        guard fd >= 0 else { throw IOError("eventfd", errno: Glibc.errno) }
        self.wakeFD = fd
    }

    /// Queues `work`; writes the eventfd when the loop is parked and nobody woke it yet.
    func submit(_ work: @escaping @Sendable () -> Void) -> Submission {
        let (outcome, wake) = self.state.withLock { state -> (Submission, Bool) in
            if state.isStopped { return (.stopped, false) }
            state.work.append(work)
            guard state.isParked, !state.isWakePending else { return (.queued, false) }
            state.isWakePending = true
            return (.queued, true)
        }
        if wake {
            var one: UInt64 = 1
            // EAGAIN only when the counter is at its maximum: the loop is woken already.
            _ = withUnsafeBytes(of: &one) { Glibc.write(self.wakeFD, $0.baseAddress, 8) }
        }
        return outcome
    }

    /// Takes every queued piece of work (the loop runs them in submission order).
    func take() -> [@Sendable () -> Void] {
        self.state.withLock { state in
            guard !state.work.isEmpty else { return [] }
            let work = state.work
            state.work = []
            return work
        }
    }

    /// Marks the loop parked unless work is waiting; returns whether it may block.
    func park() -> Bool {
        self.state.withLock { state in
            guard state.work.isEmpty else { return false }
            state.isParked = true
            return true
        }
    }

    func unpark() {
        self.state.withLock { $0.isParked = false }
    }

    /// The eventfd was reported readable: reset it, then allow the next wake-up write.
    /// Work submitted in between is taken by the loop before it parks again.
    func drainWakeFD() {
        var value: UInt64 = 0
        _ = withUnsafeMutableBytes(of: &value) { Glibc.read(self.wakeFD, $0.baseAddress, 8) }
        self.state.withLock { $0.isWakePending = false }
    }

    /// Stops the inbox for good; returns work that was queued but never ran.
    func stop() -> [@Sendable () -> Void] {
        self.state.withLock { state in
            state.isStopped = true
            let work = state.work
            state.work = []
            return work
        }
    }
}
