import Synchronization

/// The bounded hand-off from the serving loops to the exporter: `offer` appends under a
/// `Mutex` held for one array append (never waits for I/O, never grows past `capacity`);
/// a full queue drops the span and counts it (`queue_full`). The exporter takes at most a
/// batch at a time with `take`.
package final class SpanQueue: Sendable {
    package let capacity: Int
    private let storage: Mutex<[FinishedSpan]>
    private let metrics: TracingMetrics?
    private let dropped = AtomicCounter()

    package init(capacity: Int, metrics: TracingMetrics? = nil) {
        self.capacity = max(1, capacity)
        self.storage = Mutex([])
        self.metrics = metrics
    }

    /// Adds `spans` (one request's); those that do not fit are dropped and counted. Returns how
    /// many were taken.
    @discardableResult
    package func offer(_ spans: [FinishedSpan]) -> Int {
        let taken = self.storage.withLock { queue -> Int in
            let room = self.capacity - queue.count
            let taken = min(room, spans.count)
            if taken == spans.count {
                queue.append(contentsOf: spans)
            } else if taken > 0 {
                queue.append(contentsOf: spans[..<taken])
            }
            return taken
        }
        let lost = spans.count - taken
        if lost > 0 {
            self.dropped.increment(by: UInt64(lost))
            self.metrics?.droppedQueueFull.increment(by: UInt64(lost))
        }
        self.metrics?.queueLength.add(Int64(taken))
        return taken
    }

    /// Removes and returns up to `maximum` spans, oldest first.
    package func take(_ maximum: Int) -> [FinishedSpan] {
        let batch = self.storage.withLock { queue -> [FinishedSpan] in
            let count = min(maximum, queue.count)
            guard count > 0 else { return [] }
            let batch = Array(queue[..<count])
            queue.removeFirst(count)
            return batch
        }
        self.metrics?.queueLength.add(-Int64(batch.count))
        return batch
    }

    /// Spans waiting.
    package var count: Int { self.storage.withLock { $0.count } }

    /// Spans dropped because the queue was full.
    package var droppedCount: UInt64 { self.dropped.load() }
}
