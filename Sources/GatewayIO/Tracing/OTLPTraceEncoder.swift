/// `ExportTraceServiceRequest` (opentelemetry-proto, `collector/trace/v1/trace_service.proto`)
/// in protobuf, the body of an OTLP/HTTP `POST /v1/traces` with
/// `Content-Type: application/x-protobuf`. Pure: values in, bytes out.
///
/// Field numbers (opentelemetry-proto v1): `ExportTraceServiceRequest.resource_spans` 1;
/// `ResourceSpans.resource` 1, `.scope_spans` 2; `Resource.attributes` 1; `ScopeSpans.scope` 1,
/// `.spans` 2; `InstrumentationScope.name` 1, `.version` 2; `Span.trace_id` 1, `.span_id` 2,
/// `.trace_state` 3, `.parent_span_id` 4, `.name` 5, `.kind` 6, `.start_time_unix_nano` 7
/// (fixed64), `.end_time_unix_nano` 8 (fixed64), `.attributes` 9, `.status` 15, `.flags` 16
/// (fixed32); `Status.message` 2, `.code` 3 (2 = ERROR); `KeyValue.key` 1, `.value` 2;
/// `AnyValue.string_value` 1, `.bool_value` 2, `.int_value` 3.
package struct OTLPTraceEncoder: Sendable {
    /// `Resource.attributes`: `service.name` and the configured resource attributes.
    package var resource: [SpanAttribute]
    package var scopeName: String
    package var scopeVersion: String

    /// `Span.flags`: bits 0-7 the W3C trace flags, bit 8 "has is_remote", bit 9 "is_remote".
    package static let flagsHasIsRemote: UInt32 = 0x100
    package static let flagsIsRemote: UInt32 = 0x200

    package init(resource: [SpanAttribute], scopeName: String = "attest-gateway", scopeVersion: String = "") {
        self.resource = resource
        self.scopeName = scopeName
        self.scopeVersion = scopeVersion
    }

    /// One request body carrying `spans` (all of this process's resource).
    package func encode(_ spans: some Collection<FinishedSpan>) -> [UInt8] {
        var writer = ProtobufWriter()
        // About 300 bytes a span: one allocation for most batches.
        writer.reserveCapacity(256 + spans.count * 320)
        writer.writeMessageField(1) { resourceSpans in
            resourceSpans.writeMessageField(1) { resource in
                for attribute in self.resource { resource.writeMessageField(1) { Self.write(attribute, into: &$0) } }
            }
            resourceSpans.writeMessageField(2) { scopeSpans in
                scopeSpans.writeMessageField(1) { scope in
                    scope.writeStringField(1, self.scopeName)
                    if !self.scopeVersion.isEmpty { scope.writeStringField(2, self.scopeVersion) }
                }
                for span in spans { scopeSpans.writeMessageField(2) { Self.write(span, into: &$0) } }
            }
        }
        return writer.bytes
    }

    package static func write(_ span: FinishedSpan, into writer: inout ProtobufWriter) {
        withUnsafeBytes(of: (span.traceHigh.bigEndian, span.traceLow.bigEndian)) { writer.writeBytesField(1, $0) }
        withUnsafeBytes(of: span.spanID.bigEndian) { writer.writeBytesField(2, $0) }
        if let state = span.traceState, !state.isEmpty { writer.writeStringField(3, state) }
        if span.parentSpanID != 0 {
            withUnsafeBytes(of: span.parentSpanID.bigEndian) { writer.writeBytesField(4, $0) }
        }
        writer.writeStringField(5, span.name)
        writer.writeVarintField(6, span.kind.rawValue)
        writer.writeFixed64Field(7, span.startUnixNano)
        writer.writeFixed64Field(8, span.endUnixNano)
        for attribute in span.attributes { writer.writeMessageField(9) { Self.write(attribute, into: &$0) } }
        if span.isError {
            writer.writeMessageField(15) { status in
                if let message = span.statusMessage, !message.isEmpty { status.writeStringField(2, message) }
                status.writeVarintField(3, 2)
            }
        }
        // Sampled (every exported span is), and whether the parent is remote.
        var flags: UInt32 = 0x01 | Self.flagsHasIsRemote
        if span.parentIsRemote { flags |= Self.flagsIsRemote }
        writer.writeFixed32Field(16, flags)
    }

    package static func write(_ attribute: SpanAttribute, into writer: inout ProtobufWriter) {
        writer.writeStringField(1, attribute.key)
        writer.writeMessageField(2) { value in
            switch attribute.value {
            case .string(let text): value.writeStringField(1, text)
            case .bool(let flag): value.writeVarintField(2, flag ? 1 : 0)
            case .int(let number): value.writeVarintField(3, UInt64(bitPattern: number))
            }
        }
    }
}
