/// One ended span, ready for export: IDs, name, kind, wall-clock times, attributes and status.
/// A value made on the loop that served the request and handed to `SpanQueue`; the exporter
/// encodes it (`OTLPTraceEncoder`) off the serving loops.
package struct FinishedSpan: Sendable, Hashable {
    /// OTLP `Span.SpanKind`.
    package enum Kind: UInt64, Sendable {
        case `internal` = 1
        case server = 2
        case client = 3
    }

    package var traceHigh: UInt64
    package var traceLow: UInt64
    package var spanID: UInt64
    /// 0: a root span.
    package var parentSpanID: UInt64
    /// The parent came from another process (an incoming `traceparent`).
    package var parentIsRemote: Bool
    package var traceState: String?
    package var name: String
    package var kind: Kind
    package var startUnixNano: UInt64
    package var endUnixNano: UInt64
    package var attributes: [SpanAttribute]
    /// OTLP status `ERROR` (a 5xx on the server span, a failed upstream exchange); else unset.
    package var isError: Bool
    package var statusMessage: String?

    package init(
        traceHigh: UInt64, traceLow: UInt64, spanID: UInt64, parentSpanID: UInt64 = 0, parentIsRemote: Bool = false,
        traceState: String? = nil, name: String, kind: Kind, startUnixNano: UInt64, endUnixNano: UInt64,
        attributes: [SpanAttribute] = [], isError: Bool = false, statusMessage: String? = nil
    ) {
        self.traceHigh = traceHigh
        self.traceLow = traceLow
        self.spanID = spanID
        self.parentSpanID = parentSpanID
        self.parentIsRemote = parentIsRemote
        self.traceState = traceState
        self.name = name
        self.kind = kind
        self.startUnixNano = startUnixNano
        self.endUnixNano = endUnixNano
        self.attributes = attributes
        self.isError = isError
        self.statusMessage = statusMessage
    }
}

/// A span or resource attribute: a key and a string, integer or boolean value.
package struct SpanAttribute: Sendable, Hashable {
    package enum Value: Sendable, Hashable {
        case string(String)
        case int(Int64)
        case bool(Bool)
    }

    package var key: String
    package var value: Value

    package init(_ key: String, _ value: Value) {
        self.key = key
        self.value = value
    }

    package static func string(_ key: String, _ value: String) -> SpanAttribute { SpanAttribute(key, .string(value)) }
    package static func int(_ key: String, _ value: Int) -> SpanAttribute { SpanAttribute(key, .int(Int64(value))) }
}
