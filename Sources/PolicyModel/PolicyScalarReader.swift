/// Reads one YAML node as a typed value (mapping, list, string, integer, duration, size,
/// path, one of an enum's cases), or throws the `PolicyError` that names the file, line,
/// column and field and says what was expected and what was found.
///
/// The schema walk (`PolicyDecoder`, `RouteDecoder`) decides which key holds which type;
/// this type owns how each type is read and how a wrong value is described.
struct PolicyScalarReader {
    /// The name given to the loader, used in every message.
    let file: String

    /// Longest accepted duration anywhere in the file.
    static let maximumDuration = Duration.seconds(86_400)

    // MARK: - Containers

    /// The fields of a mapping, refusing keys outside `keys` (suggesting the nearest one).
    func mapping(_ node: YAMLNode, keys: [String]) throws(PolicyError) -> Fields {
        guard case .mapping(let entries) = node.content else {
            throw self.error(
                .wrongType,
                node,
                "expected a mapping with keys \(keys.joined(separator: ", ")); found \(Self.describe(node))"
            )
        }
        for entry in entries where !keys.contains(entry.key) {
            var message = "unknown key \(Self.quote(entry.key))"
            if let suggestion = PolicyValues.nearest(to: entry.key, in: keys) {
                message += "; did you mean \(Self.quote(suggestion))?"
            } else {
                message += "; expected one of \(keys.joined(separator: ", "))"
            }
            throw self.error(.unknownKey, entry.keyMark, entry.value.path, message)
        }
        return Fields(node: node, entries: entries)
    }

    func list(_ node: YAMLNode, expected: String) throws(PolicyError) -> [YAMLNode] {
        guard case .sequence(let items) = node.content else {
            throw self.error(.wrongType, node, "expected \(expected); found \(Self.describe(node))")
        }
        return items
    }

    // MARK: - Scalars

    func string(_ node: YAMLNode, expected: String) throws(PolicyError) -> String {
        guard case .scalar(let scalar) = node.content, case .string(let text) = scalar.value else {
            throw self.error(.wrongType, node, "expected \(expected); found \(Self.describe(node))")
        }
        return text
    }

    func bool(_ node: YAMLNode) throws(PolicyError) -> Bool {
        guard case .scalar(let scalar) = node.content, case .bool(let value) = scalar.value else {
            throw self.error(.wrongType, node, "expected true or false; found \(Self.describe(node))")
        }
        return value
    }

    /// One of `Value`'s cases, by raw value. Messages list every case in declaration order
    /// (`expected one of enforce, monitor, off; found "enfroce"`), so the enum is the only
    /// list of allowed values.
    func oneOf<Value: RawRepresentable & CaseIterable>(
        _ node: YAMLNode,
        as type: Value.Type = Value.self
    ) throws(PolicyError) -> Value where Value.RawValue == String {
        let expected = "one of \(Value.allCases.map(\.rawValue).joined(separator: ", "))"
        let text = try self.string(node, expected: expected)
        guard let value = Value(rawValue: text) else {
            throw self.error(.invalidValue, node, "expected \(expected); found \(Self.quote(text))")
        }
        return value
    }

    func integer(_ node: YAMLNode, in range: ClosedRange<Int>) throws(PolicyError) -> Int {
        guard case .scalar(let scalar) = node.content else {
            throw self.error(.wrongType, node, "expected an integer; found \(Self.describe(node))")
        }
        switch scalar.value {
        case .int(let value):
            guard range.contains(value) else {
                throw self.error(
                    .outOfRange,
                    node,
                    "expected an integer from \(range.lowerBound) to \(range.upperBound); found \(value)"
                )
            }
            return value
        case .hugeInt(let text):
            throw self.error(
                .outOfRange,
                node,
                "expected an integer from \(range.lowerBound) to \(range.upperBound); found \(text)"
            )
        default:
            throw self.error(.wrongType, node, "expected an integer; found \(Self.describe(node))")
        }
    }

    /// A duration above zero and at most `maximumDuration` (24h).
    func duration(_ node: YAMLNode) throws(PolicyError) -> Duration {
        let expected = "a duration like 500ms, 10s, 2m, 1h or whole seconds"
        guard case .scalar(let scalar) = node.content else {
            throw self.error(.wrongType, node, "expected \(expected); found \(Self.describe(node))")
        }
        let duration: Duration?
        switch scalar.value {
        case .int(let seconds): duration = seconds > 0 && seconds <= 86_400 ? .seconds(seconds) : nil
        case .string(let text): duration = PolicyValues.duration(text)
        case .hugeInt, .float: duration = nil
        case .null, .bool: throw self.error(.wrongType, node, "expected \(expected); found \(Self.describe(node))")
        }
        guard let duration, duration > .zero else {
            throw self.error(.invalidDuration, node, "expected \(expected) (more than 0); found \(Self.describe(node))")
        }
        guard duration <= Self.maximumDuration else {
            throw self.error(.outOfRange, node, "expected a duration of at most 24h; found \(Self.describe(node))")
        }
        return duration
    }

    /// A duration within `range` (`outOfRange` beyond it, naming both bounds).
    func duration(_ node: YAMLNode, in range: ClosedRange<Duration>) throws(PolicyError) -> Duration {
        let duration = try self.duration(node)
        guard range.contains(duration) else {
            throw self.error(
                .outOfRange, node,
                "expected a duration from \(PolicyValues.format(range.lowerBound)) to \(PolicyValues.format(range.upperBound)); found \(Self.describe(node))"
            )
        }
        return duration
    }

    func size(_ node: YAMLNode, in range: ClosedRange<Int>) throws(PolicyError) -> Int {
        let expected = "a size in bytes (1048576) or with a unit (64KiB, 1MiB)"
        guard case .scalar(let scalar) = node.content else {
            throw self.error(.wrongType, node, "expected \(expected); found \(Self.describe(node))")
        }
        let bytes: Int
        switch scalar.value {
        case .int(let value): bytes = value
        case .string(let text):
            guard let value = PolicyValues.size(text) else {
                throw self.error(.invalidSize, node, "expected \(expected); found \(Self.quote(text))")
            }
            bytes = value
        case .hugeInt(let text):
            throw self.error(
                .outOfRange,
                node,
                "expected a size up to \(PolicyValues.formatSize(range.upperBound)); found \(text)"
            )
        default:
            throw self.error(.wrongType, node, "expected \(expected); found \(Self.describe(node))")
        }
        guard range.contains(bytes) else {
            throw self.error(
                .outOfRange,
                node,
                "expected a size from \(PolicyValues.formatSize(range.lowerBound)) to \(PolicyValues.formatSize(range.upperBound)); found \(scalar.text)"
            )
        }
        return bytes
    }

    func path(_ node: YAMLNode) throws(PolicyError) -> String {
        let text = try self.string(node, expected: "a path starting with /")
        if let problem = PolicyValues.pathProblem(text) {
            throw self.error(.invalidPath, node, "expected a path that \(problem.text); found \(Self.quote(text))")
        }
        return text
    }

    // MARK: - Messages

    /// How a found value is named in messages: `"enfroce"`, `integer 8080`, `a list`.
    static func describe(_ node: YAMLNode) -> String {
        switch node.content {
        case .sequence: return "a list"
        case .mapping: return "a mapping"
        case .scalar(let scalar):
            // A substituted value may be a secret: name its variables, never quote it.
            if !scalar.variables.isEmpty {
                return "the value substituted from " + scalar.variables.map { "${\($0)}" }.joined(separator: ", ")
            }
            switch scalar.value {
            case .null: return "an empty value (null)"
            case .bool(let value): return "boolean \(value)"
            case .int(let value): return "integer \(value)"
            case .hugeInt(let text): return "integer \(text)"
            case .float(let text): return "number \(text)"
            case .string(let text): return Self.quote(text)
            }
        }
    }

    /// A found string in double quotes, escaped and cut to 80 characters.
    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars.prefix(80) {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    out += "\\u{\(String(scalar.value, radix: 16))}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        if text.unicodeScalars.count > 80 { out += "..." }
        return out + "\""
    }

    /// An error at `node` (its value's position and path).
    func error(_ code: PolicyError.Code, _ node: YAMLNode, _ message: String) -> PolicyError {
        self.error(code, node.mark, node.path, message)
    }

    func error(_ code: PolicyError.Code, _ mark: YAMLMark, _ field: String, _ message: String) -> PolicyError {
        PolicyError(code: code, file: self.file, line: mark.line, column: mark.column, field: field, message: message)
    }
}
