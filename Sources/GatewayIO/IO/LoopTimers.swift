import Synchronization

/// A piece of work an `EventLoop` runs at a time (`EventLoop.schedule`). `cancel()` may be
/// called from any thread; a cancelled timer never runs its work.
package final class LoopTimer: Sendable {
    private let cancelled = Atomic<Bool>(false)

    package init() {}

    package func cancel() {
        self.cancelled.store(true, ordering: .relaxed)
    }

    package var isCancelled: Bool { self.cancelled.load(ordering: .relaxed) }
}

/// The loop's scheduled work: a binary min-heap on (deadline, submission order), so two
/// timers for the same instant run in the order they were set. Confined to the loop.
struct LoopTimerHeap {
    private struct Entry {
        let deadline: UInt64
        let sequence: UInt64
        let timer: LoopTimer
        let work: () -> Void

        func precedes(_ other: Entry) -> Bool {
            self.deadline != other.deadline ? self.deadline < other.deadline : self.sequence < other.sequence
        }
    }

    private var entries: [Entry] = []
    private var nextSequence: UInt64 = 0

    var isEmpty: Bool { self.entries.isEmpty }
    var count: Int { self.entries.count }

    /// The earliest deadline (cancelled timers included: an early wake-up is harmless).
    var nextDeadline: UInt64? { self.entries.first?.deadline }

    mutating func insert(deadline: UInt64, timer: LoopTimer, work: @escaping () -> Void) {
        self.entries.append(Entry(deadline: deadline, sequence: self.nextSequence, timer: timer, work: work))
        self.nextSequence &+= 1
        var child = self.entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard self.entries[child].precedes(self.entries[parent]) else { break }
            self.entries.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the earliest entry's work if it is due at `now` and not cancelled
    /// (cancelled entries are dropped on the way).
    mutating func popDue(now: UInt64) -> (() -> Void)? {
        while let first = self.entries.first, first.deadline <= now {
            self.removeFirst()
            if !first.timer.isCancelled { return first.work }
        }
        return nil
    }

    mutating func removeAll() {
        self.entries.removeAll()
    }

    private mutating func removeFirst() {
        let last = self.entries.removeLast()
        guard !self.entries.isEmpty else { return }
        self.entries[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1
            guard left < self.entries.count else { break }
            let right = left + 1
            var smallest = left
            if right < self.entries.count && self.entries[right].precedes(self.entries[left]) { smallest = right }
            guard self.entries[smallest].precedes(self.entries[parent]) else { break }
            self.entries.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
