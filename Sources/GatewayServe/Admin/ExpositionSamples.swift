/// The samples of some families in a Prometheus text exposition (the registry's own `/metrics`
/// text): what the enforcement console reads, so that its figures are the very numbers a
/// scrape at the same moment shows, and a family another part of the gateway adds later
/// (`attest_gateway_key_limit_refusals_total`) appears as soon as it is rendered.
package struct ExpositionSamples: Sendable, Equatable {
    /// One series: its family name and its labels in the order rendered.
    package struct Series: Sendable, Hashable {
        package var name: String
        package var labels: [Label]

        package init(name: String, labels: [Label]) {
            self.name = name
            self.labels = labels
        }

        package subscript(_ label: String) -> String? {
            self.labels.first { $0.name == label }?.value
        }
    }

    package struct Label: Sendable, Hashable {
        package var name: String
        package var value: String

        package init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    package private(set) var values: [Series: Double] = [:]

    package init(values: [Series: Double] = [:]) {
        self.values = values
    }

    /// The samples of the families named in `families` (every family when nil); comment lines
    /// and lines that do not parse are skipped.
    package init(text: String, families: Set<String>? = nil) {
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            guard line.first != "#", let (series, value) = Self.parse(line) else { continue }
            if let families, !families.contains(series.name) { continue }
            self.values[series] = value
        }
    }

    /// Every series of the family `name`.
    package func series(_ name: String) -> [(series: Series, value: Double)] {
        self.values.compactMap { $0.key.name == name ? ($0.key, $0.value) : nil }
    }

    /// True when the exposition holds at least one series of `name`.
    package func has(_ name: String) -> Bool {
        self.values.keys.contains { $0.name == name }
    }

    /// `name{labels} value`: label values with `\\`, `\"` and `\n` escapes.
    static func parse(_ line: Substring) -> (Series, Double)? {
        let bytes = Array(line.utf8)
        var index = 0
        while index < bytes.count, bytes[index] != UInt8(ascii: "{"), bytes[index] != UInt8(ascii: " ") {
            index += 1
        }
        guard index > 0, index < bytes.count else { return nil }
        let name = String(decoding: bytes[0..<index], as: UTF8.self)
        var labels: [Label] = []
        if bytes[index] == UInt8(ascii: "{") {
            index += 1
            while index < bytes.count, bytes[index] != UInt8(ascii: "}") {
                let nameStart = index
                while index < bytes.count, bytes[index] != UInt8(ascii: "=") { index += 1 }
                guard index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "\"") else { return nil }
                let labelName = String(decoding: bytes[nameStart..<index], as: UTF8.self)
                index += 2
                var value: [UInt8] = []
                while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                    if bytes[index] == UInt8(ascii: "\\"), index + 1 < bytes.count {
                        index += 1
                        value.append(bytes[index] == UInt8(ascii: "n") ? UInt8(ascii: "\n") : bytes[index])
                    } else {
                        value.append(bytes[index])
                    }
                    index += 1
                }
                guard index < bytes.count else { return nil }
                index += 1
                labels.append(Label(labelName, String(decoding: value, as: UTF8.self)))
                if index < bytes.count, bytes[index] == UInt8(ascii: ",") { index += 1 }
            }
            guard index < bytes.count else { return nil }
            index += 1
        }
        while index < bytes.count, bytes[index] == UInt8(ascii: " ") { index += 1 }
        var end = index
        while end < bytes.count, bytes[end] != UInt8(ascii: " ") { end += 1 }
        guard let value = Double(String(decoding: bytes[index..<end], as: UTF8.self)) else { return nil }
        return (Series(name: name, labels: labels), value)
    }
}
