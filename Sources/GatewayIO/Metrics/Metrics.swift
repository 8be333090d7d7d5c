import Synchronization

/// A process-wide registry of Prometheus metrics: counters, gauges and histograms,
/// each a family with label names; `labels(...)` returns the child for one set of
/// label values (created on first use, then cached: keep the handle on hot paths).
///
/// Updates are relaxed atomics on the child (no lock); only creating a child and
/// rendering take the family's lock. Safe from any queue.
package final class MetricsRegistry: Sendable {
    private let families = Mutex<[any MetricFamily]>([])

    package init() {}

    package func counter(_ name: String, help: String, labelNames: [String] = []) -> CounterFamily {
        self.register(name) { CounterFamily(name: name, help: help, labelNames: labelNames) }
    }

    package func gauge(_ name: String, help: String, labelNames: [String] = []) -> GaugeFamily {
        self.register(name) { GaugeFamily(name: name, help: help, labelNames: labelNames) }
    }

    /// `buckets`: upper bounds in seconds, ascending (`+Inf` is added).
    package func histogram(
        _ name: String, help: String, labelNames: [String] = [], buckets: [Double] = HistogramFamily.defaultBuckets
    ) -> HistogramFamily {
        self.register(name) { HistogramFamily(name: name, help: help, labelNames: labelNames, buckets: buckets) }
    }

    /// A family read from `samples` at each render (see `ScrapedFamily`).
    @discardableResult
    package func scraped(
        _ name: String, help: String, kind: ScrapedFamily.Kind,
        samples: @escaping @Sendable () -> [ScrapedFamily.Sample]
    ) -> ScrapedFamily {
        self.register(name) { ScrapedFamily(name: name, help: help, kind: kind, samples: samples) }
    }

    /// Registering the same name twice returns the first family (same type required).
    private func register<F: MetricFamily>(_ name: String, make: () -> F) -> F {
        self.families.withLock { families in
            if let existing = families.first(where: { $0.name == name }) {
                guard let typed = existing as? F else {
                    preconditionFailure("metric \(name) registered twice with different types")
                }
                return typed
            }
            let family = make()
            families.append(family)
            return family
        }
    }

    /// Prometheus text exposition format 0.0.4.
    package func render() -> String {
        let families = self.families.withLock { $0 }
        var out = ""
        for family in families {
            family.render(into: &out)
        }
        return out
    }
}

package protocol MetricFamily: AnyObject, Sendable {
    var name: String { get }
    func render(into out: inout String)
}

/// Shared child bookkeeping for every family type.
package final class LabeledChildren<Child: Sendable>: Sendable {
    let labelNames: [String]
    private let children = Mutex<[(values: [String], child: Child)]>([])
    private let make: @Sendable () -> Child

    init(labelNames: [String], make: @escaping @Sendable () -> Child) {
        self.labelNames = labelNames
        self.make = make
    }

    func child(_ values: [String]) -> Child {
        precondition(values.count == self.labelNames.count, "label values do not match label names \(self.labelNames)")
        return self.children.withLock { children in
            if let found = children.first(where: { $0.values == values }) { return found.child }
            let child = self.make()
            children.append((values, child))
            return child
        }
    }

    var snapshot: [(values: [String], child: Child)] { self.children.withLock { $0 } }

    func labelText(_ values: [String], extra: (String, String)? = nil) -> String {
        var pairs = zip(self.labelNames, values).map { ($0, $1) }
        if let extra { pairs.append(extra) }
        return Self.labelText(pairs)
    }

    /// `{name="value",...}`, or nothing without labels.
    static func labelText(_ pairs: [(String, String)]) -> String {
        if pairs.isEmpty { return "" }
        return "{" + pairs.map { "\($0)=\"\(Self.escape($1))\"" }.joined(separator: ",") + "}"
    }

    static func escape(_ value: String) -> String {
        var out = ""
        for c in value {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }
}

package final class Counter: Sendable {
    private let value = Atomic<UInt64>(0)
    package init() {}
    @inline(__always)
    @inlinable
    package func increment(by amount: UInt64 = 1) {
        self.value.wrappingAdd(amount, ordering: .relaxed)
    }
    package var value64: UInt64 { self.value.load(ordering: .relaxed) }
}

package final class Gauge: Sendable {
    private let value = Atomic<Int64>(0)
    package init() {}
    @inline(__always)
    @inlinable
    package func add(_ amount: Int64) { self.value.wrappingAdd(amount, ordering: .relaxed) }
    package func set(_ newValue: Int64) { self.value.store(newValue, ordering: .relaxed) }
    package var value64: Int64 { self.value.load(ordering: .relaxed) }
}

/// Observations in seconds, stored in fixed buckets (non-cumulative, summed at render).
package final class Histogram: Sendable {
    package let upperBounds: [Double]
    private let boundsNanoseconds: [UInt64]
    private let buckets: [Counter]  // one per bound, plus +Inf
    private let sumNanoseconds = Counter()
    private let count = Counter()

    init(upperBounds: [Double]) {
        self.upperBounds = upperBounds
        self.boundsNanoseconds = upperBounds.map { UInt64($0 * 1e9) }
        self.buckets = (0...upperBounds.count).map { _ in Counter() }
    }

    @inline(__always)
    @inlinable
    package func observe(nanoseconds: UInt64) {
        var index = 0
        while index < self.boundsNanoseconds.count && nanoseconds > self.boundsNanoseconds[index] { index += 1 }
        self.buckets[index].increment()
        self.sumNanoseconds.increment(by: nanoseconds)
        self.count.increment()
    }

    package func observe(seconds: Double) {
        self.observe(nanoseconds: seconds <= 0 ? 0 : UInt64(seconds * 1e9))
    }

    /// Cumulative bucket counts (the last is +Inf), the sum in seconds and the count.
    package var snapshot: (cumulative: [UInt64], sum: Double, count: UInt64) {
        var running: UInt64 = 0
        let cumulative = self.buckets.map { bucket -> UInt64 in
            running += bucket.value64
            return running
        }
        return (cumulative, Double(self.sumNanoseconds.value64) / 1e9, self.count.value64)
    }
}

package final class CounterFamily: MetricFamily {
    package let name: String
    let help: String
    let children: LabeledChildren<Counter>

    init(name: String, help: String, labelNames: [String]) {
        self.name = name
        self.help = help
        self.children = LabeledChildren(labelNames: labelNames) { Counter() }
    }

    package func labels(_ values: String...) -> Counter { self.children.child(values) }
    package func labels(_ values: [String]) -> Counter { self.children.child(values) }

    package func render(into out: inout String) {
        out += "# HELP \(self.name) \(self.help)\n# TYPE \(self.name) counter\n"
        for (values, child) in self.children.snapshot {
            out += "\(self.name)\(self.children.labelText(values)) \(child.value64)\n"
        }
    }
}

package final class GaugeFamily: MetricFamily {
    package let name: String
    let help: String
    let children: LabeledChildren<Gauge>

    init(name: String, help: String, labelNames: [String]) {
        self.name = name
        self.help = help
        self.children = LabeledChildren(labelNames: labelNames) { Gauge() }
    }

    package func labels(_ values: String...) -> Gauge { self.children.child(values) }
    package func labels(_ values: [String]) -> Gauge { self.children.child(values) }

    package func render(into out: inout String) {
        out += "# HELP \(self.name) \(self.help)\n# TYPE \(self.name) gauge\n"
        for (values, child) in self.children.snapshot {
            out += "\(self.name)\(self.children.labelText(values)) \(child.value64)\n"
        }
    }
}

package final class HistogramFamily: MetricFamily {
    /// 0.5 ms … 10 s: request latencies of a proxy.
    package static let defaultBuckets: [Double] = [
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ]

    package let name: String
    let help: String
    let buckets: [Double]
    let children: LabeledChildren<Histogram>

    init(name: String, help: String, labelNames: [String], buckets: [Double]) {
        precondition(buckets == buckets.sorted(), "histogram buckets must ascend")
        self.name = name
        self.help = help
        self.buckets = buckets
        self.children = LabeledChildren(labelNames: labelNames) { Histogram(upperBounds: buckets) }
    }

    package func labels(_ values: String...) -> Histogram { self.children.child(values) }
    package func labels(_ values: [String]) -> Histogram { self.children.child(values) }

    package func render(into out: inout String) {
        out += "# HELP \(self.name) \(self.help)\n# TYPE \(self.name) histogram\n"
        for (values, child) in self.children.snapshot {
            let snap = child.snapshot
            for (i, count) in snap.cumulative.enumerated() {
                let le = i < self.buckets.count ? Self.format(self.buckets[i]) : "+Inf"
                out += "\(self.name)_bucket\(self.children.labelText(values, extra: ("le", le))) \(count)\n"
            }
            out += "\(self.name)_sum\(self.children.labelText(values)) \(snap.sum)\n"
            out += "\(self.name)_count\(self.children.labelText(values)) \(snap.count)\n"
        }
    }

    static func format(_ value: Double) -> String {
        value == value.rounded() && value < 1e15 ? String(Int(value)) : String(value)
    }
}
