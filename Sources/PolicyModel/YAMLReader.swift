private import CYAML

// File length (~550 lines): the only place libyaml's event API is touched (C stays behind this
// wall), plus the node tree and the typed readers every decoder uses to name file:line:field.

/// A position in the YAML text, 1-based (libyaml's `yaml_mark_t` is 0-based).
struct YAMLMark: Hashable, Sendable {
    var line: Int
    var column: Int
}

/// One node of a parsed YAML document, with its position and its field path
/// (`routes[0].match`), so that every later check can name both.
struct YAMLNode: Sendable {
    enum Content: Sendable {
        case scalar(YAMLScalar)
        case sequence([YAMLNode])
        /// Entries in document order; keys are unique (duplicates are refused while reading).
        case mapping([YAMLEntry])
    }

    var content: Content
    var mark: YAMLMark
    /// Field path from the document root: `""` for the root, `limits.max_connections`, `listen[1]`.
    var path: String
}

struct YAMLEntry: Sendable {
    var key: String
    var keyMark: YAMLMark
    var value: YAMLNode
}

/// A scalar and what it means under the YAML 1.2 core schema.
///
/// Quoted scalars and `!!str`-tagged ones are always strings. A plain scalar is resolved:
/// `null`, `~` and the empty value are null; `true`/`false` booleans; decimal, `0x` and
/// `0o` integers; decimal floats; anything else a string. So `mode: off` is the string
/// "off" (YAML 1.1's yes/no/on/off booleans do not apply).
struct YAMLScalar: Sendable, Hashable {
    enum Value: Sendable, Hashable {
        case null
        case bool(Bool)
        case int(Int)
        /// Integer syntax, but it does not fit in 64 bits.
        case hugeInt(String)
        case float(String)
        case string(String)
    }

    /// The text as written (after YAML unescaping and `${NAME}` substitution).
    var text: String
    var value: Value
    /// The variables substituted into `text` (`PolicyEnvironment`), in order: when non-empty,
    /// messages name them instead of quoting the text.
    var variables: [String] = []

    init(text: String, isPlain: Bool, variables: [String] = []) {
        self.text = text
        self.value = isPlain ? Self.resolve(text) : .string(text)
        self.variables = variables
    }

    private static func resolve(_ text: String) -> Value {
        switch text {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE": return .bool(true)
        case "false", "False", "FALSE": return .bool(false)
        case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN":
            return .float(text)
        default: break
        }
        let utf8 = Array(text.utf8)
        if let value = Self.integer(utf8) { return value }
        if Self.isFloat(utf8) { return .float(text) }
        return .string(text)
    }

    private static func isDigit(_ b: UInt8, radix: Int) -> Bool {
        switch radix {
        case 8: return b >= UInt8(ascii: "0") && b <= UInt8(ascii: "7")
        case 16:
            return (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9"))
                || (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "f"))
                || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "F"))
        default: return b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")
        }
    }

    /// `[-+]?[0-9]+ | 0o[0-7]+ | 0x[0-9a-fA-F]+`
    private static func integer(_ bytes: [UInt8]) -> Value? {
        let text = String(decoding: bytes, as: UTF8.self)
        if bytes.count > 2, bytes[0] == UInt8(ascii: "0"),
            bytes[1] == UInt8(ascii: "x") || bytes[1] == UInt8(ascii: "o")
        {
            let radix = bytes[1] == UInt8(ascii: "x") ? 16 : 8
            guard bytes[2...].allSatisfy({ Self.isDigit($0, radix: radix) }) else { return nil }
            guard let value = Int(String(decoding: bytes[2...], as: UTF8.self), radix: radix) else {
                return .hugeInt(text)
            }
            return .int(value)
        }
        var digits = bytes[...]
        if let first = digits.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") {
            digits = digits.dropFirst()
        }
        guard !digits.isEmpty, digits.allSatisfy({ Self.isDigit($0, radix: 10) }) else { return nil }
        guard let value = Int(text) else { return .hugeInt(text) }
        return .int(value)
    }

    /// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`
    private static func isFloat(_ bytes: [UInt8]) -> Bool {
        var i = 0
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") || bytes[i] == UInt8(ascii: "+") { i += 1 }
        var mantissaDigits = 0
        while i < bytes.count, Self.isDigit(bytes[i], radix: 10) { i += 1; mantissaDigits += 1 }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            while i < bytes.count, Self.isDigit(bytes[i], radix: 10) { i += 1; mantissaDigits += 1 }
        }
        guard mantissaDigits > 0 else { return false }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "-") || bytes[i] == UInt8(ascii: "+") { i += 1 }
            var exponentDigits = 0
            while i < bytes.count, Self.isDigit(bytes[i], radix: 10) { i += 1; exponentDigits += 1 }
            guard exponentDigits > 0 else { return false }
        }
        return i == bytes.count
    }
}

/// Reads one YAML document into `YAMLNode`s with libyaml's event parser.
///
/// Hardened for configuration files: bounded size (checked by the caller), bounded nesting
/// depth and node count, anchors and aliases refused (no alias expansion, so no
/// "billion laughs"), duplicate mapping keys refused, explicit tags other than `!!str`
/// refused, exactly one document. Scalar values (not keys) go through `PolicyEnvironment`'s
/// `${NAME}` substitution before they are typed.
enum YAMLReader {
    /// Deepest nesting of lists and mappings accepted.
    static let maximumDepth = 32
    /// Most nodes (scalars, lists, mappings) accepted in one document.
    static let maximumNodes = 100_000

    private static let stringTag = "tag:yaml.org,2002:str"
    private static let sequenceTag = "tag:yaml.org,2002:seq"
    private static let mappingTag = "tag:yaml.org,2002:map"

    static func read(_ bytes: [UInt8], sourcePath: String) throws(PolicyError) -> YAMLNode {
        var substitutions: [PolicyEnvironment.Substitution] = []
        return try Self.read(
            bytes, sourcePath: sourcePath, environment: PolicyEnvironment([:]), substitutions: &substitutions)
    }

    /// As `read(_:sourcePath:)`, substituting `${NAME}` from `environment`; `substitutions`
    /// receives every one made (for redaction of later messages).
    static func read(
        _ bytes: [UInt8],
        sourcePath: String,
        environment: PolicyEnvironment,
        substitutions: inout [PolicyEnvironment.Substitution]
    ) throws(PolicyError) -> YAMLNode {
        // libyaml asserts on a NULL input pointer, which an empty array may give.
        guard !bytes.isEmpty else {
            throw PolicyError(
                code: .emptyDocument,
                file: sourcePath,
                line: 0,
                column: 0,
                field: "",
                message: "the file holds no YAML document"
            )
        }
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        defer { parser.deallocate() }
        guard yaml_parser_initialize(parser) == 1 else {
            throw PolicyError(
                code: .syntax,
                file: sourcePath,
                line: 0,
                column: 0,
                field: "",
                message: "libyaml could not initialize its parser (out of memory)"
            )
        }
        defer { yaml_parser_delete(parser) }

        let result: Result<YAMLNode, PolicyError> = bytes.withUnsafeBufferPointer { buffer in
            // libyaml keeps the pointer: the buffer must outlive every yaml_parser_parse call.
            yaml_parser_set_input_string(parser, buffer.baseAddress, buffer.count)
            yaml_parser_set_encoding(parser, YAML_UTF8_ENCODING)
            var events = EventSource(
                parser: parser, bytes: buffer, sourcePath: sourcePath, environment: environment)
            defer { substitutions = events.substitutions }
            do throws(PolicyError) {
                return .success(try events.readDocument())
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Pulls events from libyaml and builds nodes. Lives only inside `read`.
    private struct EventSource {
        enum Event {
            case streamStart, streamEnd, documentStart, documentEnd
            case alias
            /// `sourceOffset`: columns from the scalar's mark to its first character when the
            /// text is written on one line exactly as read (plain, or quoted without escapes);
            /// nil otherwise.
            case scalar(text: String, isPlain: Bool, tag: String?, anchor: String?, sourceOffset: Int?)
            case sequenceStart(tag: String?, anchor: String?)
            case sequenceEnd
            case mappingStart(tag: String?, anchor: String?)
            case mappingEnd
        }

        let parser: UnsafeMutablePointer<yaml_parser_t>
        let bytes: UnsafeBufferPointer<UInt8>
        let sourcePath: String
        let environment: PolicyEnvironment
        var nodeCount = 0
        var substitutions: [PolicyEnvironment.Substitution] = []

        init(
            parser: UnsafeMutablePointer<yaml_parser_t>,
            bytes: UnsafeBufferPointer<UInt8>,
            sourcePath: String,
            environment: PolicyEnvironment
        ) {
            self.parser = parser
            self.bytes = bytes
            self.sourcePath = sourcePath
            self.environment = environment
        }

        mutating func readDocument() throws(PolicyError) -> YAMLNode {
            guard case (.streamStart, _) = try self.next() else {
                throw self.error(.syntax, YAMLMark(line: 1, column: 1), "", "expected the start of a YAML stream")
            }
            let (first, firstMark) = try self.next()
            switch first {
            case .streamEnd:
                throw self.error(.emptyDocument, YAMLMark(line: 0, column: 0), "", "the file holds no YAML document")
            case .documentStart:
                break
            default:
                throw self.error(.syntax, firstMark, "", "expected a YAML document")
            }
            let root = try self.readNode(try self.next(), path: "", depth: 0)
            let (end, endMark) = try self.next()
            guard case .documentEnd = end else {
                throw self.error(.syntax, endMark, "", "expected the end of the document")
            }
            let (after, afterMark) = try self.next()
            switch after {
            case .streamEnd:
                return root
            case .documentStart:
                throw self.error(
                    .multipleDocuments,
                    afterMark,
                    "",
                    "expected one YAML document; found a second one (`---`)"
                )
            default:
                throw self.error(.syntax, afterMark, "", "expected the end of the YAML stream")
            }
        }

        private mutating func readNode(
            _ start: (Event, YAMLMark),
            path: String,
            depth: Int
        ) throws(PolicyError) -> YAMLNode {
            let (event, mark) = start
            self.nodeCount += 1
            guard self.nodeCount <= YAMLReader.maximumNodes else {
                throw self.error(.tooManyNodes, mark, path, "more than \(YAMLReader.maximumNodes) YAML nodes")
            }
            switch event {
            case .alias:
                throw self.error(.aliasNotAllowed, mark, path, "YAML aliases (*name) are not allowed in a policy")
            case .scalar(let written, let isPlain, let tag, let anchor, let sourceOffset):
                try self.refuse(anchor: anchor, mark: mark, path: path)
                let before = self.substitutions.count
                let text = try self.substitute(written, mark: mark, sourceOffset: sourceOffset, path: path)
                let variables = self.substitutions[before...].map(\.name)
                var isString = !isPlain
                if let tag {
                    guard tag == YAMLReader.stringTag || tag == "!" else {
                        throw self.error(
                            .tagNotAllowed,
                            mark,
                            path,
                            "YAML tags are not allowed (only !!str); found \(tag)"
                        )
                    }
                    isString = true
                }
                return YAMLNode(
                    content: .scalar(YAMLScalar(text: text, isPlain: !isString, variables: variables)),
                    mark: mark,
                    path: path
                )
            case .sequenceStart(let tag, let anchor):
                try self.refuse(anchor: anchor, mark: mark, path: path)
                try self.refuse(tag: tag, allowed: YAMLReader.sequenceTag, mark: mark, path: path)
                guard depth < YAMLReader.maximumDepth else {
                    throw self.error(.tooDeep, mark, path, "nesting deeper than \(YAMLReader.maximumDepth) levels")
                }
                var items: [YAMLNode] = []
                while true {
                    let next = try self.next()
                    if case .sequenceEnd = next.0 { break }
                    items.append(try self.readNode(next, path: "\(path)[\(items.count)]", depth: depth + 1))
                }
                return YAMLNode(content: .sequence(items), mark: mark, path: path)
            case .mappingStart(let tag, let anchor):
                try self.refuse(anchor: anchor, mark: mark, path: path)
                try self.refuse(tag: tag, allowed: YAMLReader.mappingTag, mark: mark, path: path)
                guard depth < YAMLReader.maximumDepth else {
                    throw self.error(.tooDeep, mark, path, "nesting deeper than \(YAMLReader.maximumDepth) levels")
                }
                var entries: [YAMLEntry] = []
                var seen: [String: YAMLMark] = [:]
                while true {
                    let (keyEvent, keyMark) = try self.next()
                    let key: String
                    switch keyEvent {
                    case .mappingEnd:
                        return YAMLNode(content: .mapping(entries), mark: mark, path: path)
                    case .scalar(let text, _, let tag, let anchor, _):
                        try self.refuse(anchor: anchor, mark: keyMark, path: path)
                        if let tag, tag != YAMLReader.stringTag, tag != "!" {
                            throw self.error(
                                .tagNotAllowed,
                                keyMark,
                                path,
                                "YAML tags are not allowed (only !!str); found \(tag)"
                            )
                        }
                        key = text
                    case .alias:
                        throw self.error(
                            .aliasNotAllowed,
                            keyMark,
                            path,
                            "YAML aliases (*name) are not allowed in a policy"
                        )
                    default:
                        throw self.error(
                            .nonScalarKey,
                            keyMark,
                            path,
                            "expected a plain key; found a list or mapping used as a key"
                        )
                    }
                    let childPath = path.isEmpty ? key : "\(path).\(key)"
                    self.nodeCount += 1
                    if let first = seen[key] {
                        throw self.error(
                            .duplicateKey,
                            keyMark,
                            childPath,
                            "duplicate key \"\(key)\" (first given at line \(first.line), column \(first.column))"
                        )
                    }
                    seen[key] = keyMark
                    let value = try self.readNode(try self.next(), path: childPath, depth: depth + 1)
                    entries.append(YAMLEntry(key: key, keyMark: keyMark, value: value))
                }
            default:
                throw self.error(.syntax, mark, path, "unexpected YAML event")
            }
        }

        /// `${NAME}` substitution (`PolicyEnvironment`); an error points at the `$` when the
        /// scalar is written on one line as read, else at the scalar.
        private mutating func substitute(
            _ text: String,
            mark: YAMLMark,
            sourceOffset: Int?,
            path: String
        ) throws(PolicyError) -> String {
            switch self.environment.substitute(text, substitutions: &self.substitutions) {
            case .success(let substituted):
                return substituted
            case .failure(let failure):
                var at = mark
                if let sourceOffset { at.column += sourceOffset + failure.offset }
                switch failure.kind {
                case .unset(let name):
                    throw self.error(
                        .undefinedVariable, at, path,
                        "environment variable \(name) is not set (referenced as ${\(name)}; write $${ for a literal ${)"
                    )
                case .malformed:
                    throw self.error(
                        .invalidSubstitution, at, path,
                        "expected ${NAME} with NAME of letters, digits and _ (not starting with a digit) "
                            + "and a closing }; write $${ for a literal ${")
                }
            }
        }

        private func refuse(anchor: String?, mark: YAMLMark, path: String) throws(PolicyError) {
            if let anchor {
                throw self.error(
                    .anchorNotAllowed,
                    mark,
                    path,
                    "YAML anchors (&\(anchor)) are not allowed in a policy"
                )
            }
        }

        private func refuse(tag: String?, allowed: String, mark: YAMLMark, path: String) throws(PolicyError) {
            if let tag, tag != allowed {
                throw self.error(.tagNotAllowed, mark, path, "YAML tags are not allowed; found \(tag)")
            }
        }

        private func error(_ code: PolicyError.Code, _ mark: YAMLMark, _ path: String, _ message: String) -> PolicyError
        {
            PolicyError(
                code: code,
                file: self.sourcePath,
                line: mark.line,
                column: mark.column,
                field: path,
                message: message
            )
        }

        /// The next event, converted to Swift values (the libyaml event is freed here).
        private mutating func next() throws(PolicyError) -> (Event, YAMLMark) {
            var event = yaml_event_t()
            guard yaml_parser_parse(self.parser, &event) == 1 else {
                throw self.syntaxError()
            }
            defer { yaml_event_delete(&event) }
            let mark = YAMLMark(line: Int(event.start_mark.line) + 1, column: Int(event.start_mark.column) + 1)
            switch event.type {
            case YAML_STREAM_START_EVENT: return (.streamStart, mark)
            case YAML_STREAM_END_EVENT: return (.streamEnd, mark)
            case YAML_DOCUMENT_START_EVENT: return (.documentStart, mark)
            case YAML_DOCUMENT_END_EVENT: return (.documentEnd, mark)
            case YAML_ALIAS_EVENT: return (.alias, mark)
            case YAML_SCALAR_EVENT:
                let scalar = event.data.scalar
                let text = Self.string(scalar.value, length: scalar.length) ?? ""
                return (
                    .scalar(
                        text: text,
                        isPlain: scalar.style == YAML_PLAIN_SCALAR_STYLE,
                        tag: Self.string(scalar.tag),
                        anchor: Self.string(scalar.anchor),
                        sourceOffset: self.sourceOffset(
                            of: text, from: Int(event.start_mark.index), to: Int(event.end_mark.index))
                    ),
                    mark
                )
            case YAML_SEQUENCE_START_EVENT:
                let start = event.data.sequence_start
                return (.sequenceStart(tag: Self.string(start.tag), anchor: Self.string(start.anchor)), mark)
            case YAML_SEQUENCE_END_EVENT: return (.sequenceEnd, mark)
            case YAML_MAPPING_START_EVENT:
                let start = event.data.mapping_start
                return (.mappingStart(tag: Self.string(start.tag), anchor: Self.string(start.anchor)), mark)
            case YAML_MAPPING_END_EVENT: return (.mappingEnd, mark)
            default:
                throw self.error(.syntax, mark, "", "unexpected YAML event")
            }
        }

        /// 0 when the source bytes of a scalar are its text (plain), 1 when they are the text
        /// between quotes (no escapes, one line); nil otherwise (the column of a character
        /// inside it cannot be computed from its index in the text). The scalar's mark may
        /// include a tag (`!!str x`): then nil as well.
        private func sourceOffset(of text: String, from start: Int, to end: Int) -> Int? {
            guard start >= 0, start <= end, end <= self.bytes.count else { return nil }
            let source = self.bytes[start..<end]
            let utf8 = Array(text.utf8)
            guard !utf8.contains(UInt8(ascii: "\n")) else { return nil }
            if source.elementsEqual(utf8) { return 0 }
            if source.count == utf8.count + 2, let first = source.first,
                first == UInt8(ascii: "\"") || first == UInt8(ascii: "'"), source.last == first,
                source.dropFirst().dropLast().elementsEqual(utf8)
            {
                return 1
            }
            return nil
        }

        private static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?, length: Int) -> String? {
            guard let pointer else { return nil }
            return String(decoding: UnsafeBufferPointer(start: pointer, count: length), as: UTF8.self)
        }

        private static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
            guard let pointer else { return nil }
            var length = 0
            while pointer[length] != 0 { length += 1 }
            return String(decoding: UnsafeBufferPointer(start: pointer, count: length), as: UTF8.self)
        }

        /// libyaml's own message and position: "did not find expected key (while parsing a block
        /// mapping that started at line 3, column 1)".
        private func syntaxError() -> PolicyError {
            let state = self.parser.pointee
            var problem = state.problem.map { String(cString: $0) } ?? "invalid YAML"
            var mark = YAMLMark(line: Int(state.problem_mark.line) + 1, column: Int(state.problem_mark.column) + 1)
            if state.error == YAML_READER_ERROR {
                // Reader errors (bad encoding, control characters) carry a byte offset, not a mark.
                mark = Self.mark(ofOffset: state.problem_offset, in: self.bytes)
                if state.problem_value != -1 {
                    problem += " (byte 0x\(String(UInt8(truncatingIfNeeded: state.problem_value), radix: 16)))"
                }
            }
            if let context = state.context {
                let contextMark = state.context_mark
                problem +=
                    " (\(String(cString: context)) at line \(contextMark.line + 1), column \(contextMark.column + 1))"
            }
            return PolicyError(
                code: .syntax,
                file: self.sourcePath,
                line: mark.line,
                column: mark.column,
                field: "",
                message: "YAML syntax error: \(problem)"
            )
        }

        private static func mark(ofOffset offset: Int, in bytes: UnsafeBufferPointer<UInt8>) -> YAMLMark {
            var line = 1
            var column = 1
            for i in 0..<min(offset, bytes.count) {
                if bytes[i] == UInt8(ascii: "\n") {
                    line += 1
                    column = 1
                } else if bytes[i] & 0xC0 != 0x80 {
                    column += 1
                }
            }
            return YAMLMark(line: line, column: column)
        }
    }
}
