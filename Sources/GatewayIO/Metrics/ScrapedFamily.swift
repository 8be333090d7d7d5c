/// A metric family whose samples are read at each render, from state another component
/// already keeps (a store's connection counters): nothing is updated on the request path and
/// nothing is stale. Prometheus client libraries call this a collector (`GaugeFunc`,
/// `CounterFunc`).
///
/// A family with no samples at a scrape renders nothing, not even its HELP and TYPE lines: a
/// store without connections shows no connection families.
package final class ScrapedFamily: MetricFamily {
    package enum Kind: String, Sendable {
        case counter, gauge
    }

    /// One line of the family: its label pairs (in order) and value.
    package struct Sample: Sendable {
        package var labels: [(name: String, value: String)]
        package var value: Double

        package init(_ labels: [(name: String, value: String)] = [], value: Int) {
            self.labels = labels
            self.value = Double(value)
        }

        package init(_ labels: [(name: String, value: String)] = [], value: Double) {
            self.labels = labels
            self.value = value
        }
    }

    package let name: String
    let help: String
    let kind: Kind
    private let samples: @Sendable () -> [Sample]

    init(name: String, help: String, kind: Kind, samples: @escaping @Sendable () -> [Sample]) {
        self.name = name
        self.help = help
        self.kind = kind
        self.samples = samples
    }

    package func render(into out: inout String) {
        let samples = self.samples()
        guard !samples.isEmpty else { return }
        out += "# HELP \(self.name) \(self.help)\n# TYPE \(self.name) \(self.kind.rawValue)\n"
        for sample in samples {
            let labels = LabeledChildren<Counter>.labelText(sample.labels.map { ($0.name, $0.value) })
            out += "\(self.name)\(labels) \(Self.format(sample.value))\n"
        }
    }

    /// Whole numbers without a fraction (`3`, not `3.0`), as the integer-valued families always were.
    static func format(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 9.0e15 { return String(Int64(value)) }
        return String(value)
    }
}
