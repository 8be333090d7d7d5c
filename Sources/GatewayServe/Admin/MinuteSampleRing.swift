/// The console's memory of the last hour: the counters it shows, sampled once a minute into a
/// ring of at most `capacity` snapshots (61: the oldest is an hour old). "The last hour" is
/// then the counters now minus the oldest snapshot not older than the window. Memory is
/// bounded by the capacity times the number of series the console reads (not by traffic).
///
/// Per gateway instance: each process counts only what it served. A value; the console keeps
/// it behind a lock.
package struct MinuteSampleRing: Sendable {
    package struct Snapshot: Sendable {
        /// Seconds on the clock the ring is fed with (monotonic in `serve`).
        package var time: Double
        package var samples: ExpositionSamples
    }

    package let capacity: Int
    package let windowSeconds: Double
    private var snapshots: [Snapshot] = []

    /// - Parameter start: the process's counters were all 0 then (the first baseline).
    package init(start: Double, capacity: Int = 61, windowSeconds: Double = 3600) {
        self.capacity = max(capacity, 2)
        self.windowSeconds = windowSeconds
        self.snapshots = [Snapshot(time: start, samples: ExpositionSamples())]
    }

    package var count: Int { self.snapshots.count }

    /// Adds a sample; the oldest goes once the ring is full.
    package mutating func record(_ samples: ExpositionSamples, at time: Double) {
        self.snapshots.append(Snapshot(time: time, samples: samples))
        if self.snapshots.count > self.capacity { self.snapshots.removeFirst(self.snapshots.count - self.capacity) }
    }

    /// The snapshot "the last hour" is counted from at `now`: the oldest within the window, or
    /// the newest before it when none is (a sampler that fell behind).
    package func baseline(at now: Double) -> Snapshot {
        if let inWindow = self.snapshots.first(where: { now - $0.time <= self.windowSeconds }) { return inWindow }
        return self.snapshots[self.snapshots.count - 1]
    }
}
