/// `tracing:` (a row of `PolicyDecoder`'s table; docs/operations.md "Traces").
extension PolicyDecoder {
    static let tracingKeys = [
        "enabled", "endpoint", "sample_ratio", "headers", "service_name", "resource_attributes", "batch_size",
        "queue_size", "timeout", "export_interval",
    ]

    func decodeTracing(_ top: Fields) throws(PolicyError) -> TracingPolicy {
        var tracing = TracingPolicy()
        guard let node = top["tracing"] else { return tracing }
        let fields = try self.reader.mapping(node, keys: Self.tracingKeys)
        if let value = fields["enabled"] { tracing.enabled = try self.reader.bool(value) }
        if let value = fields["endpoint"] {
            let text = try self.reader.string(value, expected: "an http:// or https:// URL")
            guard let endpoint = TracingPolicy.Endpoint.parse(text) else {
                throw self.reader.error(
                    .invalidValue, value,
                    "expected an http:// or https:// collector URL (host, optional port and path, no query); found \(PolicyScalarReader.quote(text))"
                )
            }
            tracing.endpoint = endpoint
        }
        if let value = fields["sample_ratio"] { tracing.sampleRatio = try self.ratio(value) }
        if let value = fields["headers"] {
            for (name, valueNode) in try self.stringMapping(value) {
                let text = try self.reader.string(valueNode, expected: "a header value")
                guard TracingPolicy.isValidHeader(name: name, value: text) else {
                    throw self.reader.error(
                        .invalidValue, valueNode,
                        "a header needs a token name and a value of visible ASCII, spaces and tabs")
                }
                tracing.headers.append(TracingPolicy.Header(name: name, value: text))
            }
        }
        if let value = fields["service_name"] {
            let text = try self.reader.string(value, expected: "a service name")
            guard !text.isEmpty, text.utf8.count <= 256 else {
                throw self.reader.error(.invalidValue, value, "expected 1 to 256 bytes")
            }
            tracing.serviceName = text
        }
        if let value = fields["resource_attributes"] {
            for (key, valueNode) in try self.stringMapping(value) {
                let text = try self.reader.string(valueNode, expected: "an attribute value")
                guard text.utf8.count <= 1024 else {
                    throw self.reader.error(.invalidValue, valueNode, "expected at most 1024 bytes")
                }
                tracing.resourceAttributes.append(TracingPolicy.Attribute(key: key, value: text))
            }
        }
        if let value = fields["batch_size"] {
            tracing.batchSize = try self.reader.integer(value, in: TracingPolicy.batchSizeRange)
        }
        if let value = fields["queue_size"] {
            tracing.queueSize = try self.reader.integer(value, in: TracingPolicy.queueSizeRange)
        }
        if let value = fields["timeout"] {
            tracing.timeout = try self.reader.duration(value, in: TracingPolicy.timeoutRange)
        }
        if let value = fields["export_interval"] {
            tracing.exportInterval = try self.reader.duration(value, in: TracingPolicy.exportIntervalRange)
        }
        if let batch = tracing.batchSize, let queue = tracing.queueSize, batch > queue, let node = fields["batch_size"]
        {
            throw self.reader.error(.conflictingKeys, node, "batch_size \(batch) is larger than queue_size \(queue)")
        }
        return tracing
    }

    /// A number from 0 to 1 (`0`, `1`, `0.25`).
    private func ratio(_ node: YAMLNode) throws(PolicyError) -> Double {
        var number: Double?
        if case .scalar(let scalar) = node.content {
            switch scalar.value {
            case .int(let value): number = Double(value)
            case .float(let text): number = Double(text)
            default: break
            }
        }
        guard let number else {
            throw self.reader.error(
                .wrongType, node, "expected a number from 0 to 1; found \(PolicyScalarReader.describe(node))")
        }
        guard number.isFinite, (0...1).contains(number) else {
            throw self.reader.error(.outOfRange, node, "expected a number from 0 to 1; found \(number)")
        }
        return number
    }

    /// A mapping of names to scalar nodes, in file order (at most 64 entries).
    private func stringMapping(_ node: YAMLNode) throws(PolicyError) -> [(String, YAMLNode)] {
        guard case .mapping(let entries) = node.content else {
            throw self.reader.error(
                .wrongType, node, "expected a mapping of names to strings; found \(PolicyScalarReader.describe(node))")
        }
        guard entries.count <= 64 else {
            throw self.reader.error(.outOfRange, node, "expected at most 64 entries; found \(entries.count)")
        }
        return entries.map { ($0.key, $0.value) }
    }
}
