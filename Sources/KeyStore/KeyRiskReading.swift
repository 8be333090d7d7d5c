package import Foundation

/// A key's fraud-risk fields as the counter script reads them in the same round trip as the
/// counter (no extra Redis call per request): the last verified risk metric, its receipt's
/// creation time, and whether the key's refresh is due (lazy refresh: the caller moves it to
/// the front of the due set).
package struct KeyRiskReading: Sendable, Hashable {
    package var metric: Int?
    package var metricTime: Date?
    package var refreshDue: Bool

    package init(metric: Int? = nil, metricTime: Date? = nil, refreshDue: Bool = false) {
        self.metric = metric
        self.metricTime = metricTime
        self.refreshDue = refreshDue
    }

    /// Nothing known (the memory store, or a key never refreshed).
    package static let unknown = KeyRiskReading()

    /// Whole seconds since the metric's receipt was made, never negative; nil when unknown.
    package func age(at now: Date) -> Int? {
        guard self.metric != nil, let time = self.metricTime else { return nil }
        return max(0, Int(now.timeIntervalSince(time)))
    }
}
