import GateContract
import GatewayTesting
import HTTP1
import Testing

@testable import GatewayIO
@testable import GatewayServe
@testable import HTTPProxy
@testable import PolicyModel

/// The pure parts of tracing: the protobuf bytes, W3C context, the sampler, the tracer's
/// decisions, the bounded queue, the OTLP/HTTP request and answers, and the configuration.
@Suite struct TracingTests {
    // MARK: - Protobuf

    @Test func protobufWriterWritesVarintsFixedAndLengthDelimitedFields() {
        var writer = ProtobufWriter()
        writer.writeVarint(0)
        writer.writeVarint(1)
        writer.writeVarint(300)
        writer.writeVarint(UInt64.max)
        #expect(writer.bytes == [0x00, 0x01, 0xAC, 0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
        var fields = ProtobufWriter()
        fields.writeFixed64Field(7, 0x0102_0304_0506_0708)
        fields.writeFixed32Field(16, 0x0101)
        fields.writeStringField(5, "ab")
        fields.writeMessageField(15) { $0.writeVarintField(3, 2) }
        #expect(
            fields.bytes == [
                0x39, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // field 7, wire type 1, little-endian
                0x85, 0x01, 0x01, 0x01, 0x00, 0x00,  // field 16 (tag 133 needs two varint bytes), wire type 5
                0x2A, 0x02, 0x61, 0x62,  // field 5, length 2
                0x7A, 0x02, 0x18, 0x02,  // field 15 { field 3 = 2 }
            ])
    }

    static let span = FinishedSpan(
        traceHigh: 0x0102_0304_0506_0708, traceLow: 0x090A_0B0C_0D0E_0F10, spanID: 0x1112_1314_1516_1718,
        name: "s", kind: .server, startUnixNano: 1, endUnixNano: 2, attributes: [.string("k", "v")])

    @Test func aSpanEncodesToTheOpenTelemetryProtoFieldNumbers() {
        var writer = ProtobufWriter()
        OTLPTraceEncoder.write(Self.span, into: &writer)
        let expected: [UInt8] =
            [0x0A, 0x10] + Array(0x01...0x10)  // trace_id = 1, 16 bytes, big-endian
            + [0x12, 0x08] + Array(0x11...0x18)  // span_id = 2
            + [0x2A, 0x01, 0x73]  // name = 5
            + [0x30, 0x02]  // kind = 6: SPAN_KIND_SERVER
            + [0x39, 0x01, 0, 0, 0, 0, 0, 0, 0]  // start_time_unix_nano = 7, fixed64
            + [0x41, 0x02, 0, 0, 0, 0, 0, 0, 0]  // end_time_unix_nano = 8, fixed64
            // attributes = 9 {key = 1, value = 2 {string_value = 1}}
            + [0x4A, 0x08, 0x0A, 0x01, 0x6B, 0x12, 0x03, 0x0A, 0x01, 0x76]
            + [0x85, 0x01, 0x01, 0x01, 0x00, 0x00]  // flags = 16: sampled | has-is-remote
        #expect(writer.bytes == expected)

        var child = Self.span
        child.parentSpanID = 0x2122_2324_2526_2728
        child.parentIsRemote = true
        child.isError = true
        child.statusMessage = "x"
        child.attributes = [.int("n", 200), SpanAttribute("b", .bool(true)), .int("m", -1)]
        var childWriter = ProtobufWriter()
        OTLPTraceEncoder.write(child, into: &childWriter)
        let childBytes = childWriter.bytes
        // parent_span_id = 4 follows span_id.
        #expect(Array(childBytes[28..<38]) == [0x22, 0x08] + Array(0x21...0x28))
        // int_value = 3 (varint), bool_value = 2, and a negative int as ten varint bytes.
        let attributes: [UInt8] =
            [0x4A, 0x08, 0x0A, 0x01, 0x6E, 0x12, 0x03, 0x18, 0xC8, 0x01]
            + [0x4A, 0x07, 0x0A, 0x01, 0x62, 0x12, 0x02, 0x10, 0x01]
            + [
                0x4A, 0x10, 0x0A, 0x01, 0x6D, 0x12, 0x0B, 0x18, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                0x01,
            ]
        // status = 15 {message = 2 "x", code = 3 ERROR}, then flags with is-remote.
        let tail: [UInt8] = [0x7A, 0x05, 0x12, 0x01, 0x78, 0x18, 0x02, 0x85, 0x01, 0x01, 0x03, 0x00, 0x00]
        #expect(Array(childBytes.suffix(attributes.count + tail.count)) == attributes + tail)
    }

    @Test func anExportRequestNestsResourceScopeAndSpans() {
        let encoder = OTLPTraceEncoder(resource: [.string("service.name", "g")], scopeName: "a")
        let bytes = encoder.encode([Self.span])
        var spanWriter = ProtobufWriter()
        OTLPTraceEncoder.write(Self.span, into: &spanWriter)
        // resource = 1 (21 bytes) { attributes = 1 (19) { key = 1 (12), value = 2 { string_value = 1 } } }
        let resource: [UInt8] =
            [0x0A, 0x15, 0x0A, 0x13, 0x0A, 0x0C] + Array("service.name".utf8) + [0x12, 0x03, 0x0A, 0x01, 0x67]
        let scope: [UInt8] = [0x0A, 0x03, 0x0A, 0x01, 0x61]
        let spans: [UInt8] = [0x12, UInt8(spanWriter.bytes.count)] + spanWriter.bytes
        let scopeSpans: [UInt8] = [0x12, UInt8(scope.count + spans.count)] + scope + spans
        let resourceSpans = resource + scopeSpans
        #expect(bytes == [0x0A, UInt8(resourceSpans.count)] + resourceSpans)
    }

    @Test func aNestedMessageOf128BytesOrMoreGetsATwoByteLength() {
        let value = String(repeating: "x", count: 200)
        var writer = ProtobufWriter()
        OTLPTraceEncoder.write(.string("k", value), into: &writer)
        // KeyValue { key = 1 "k", value = 2 (203 bytes: 0xCB 0x01) { string_value = 1 (200: 0xC8 0x01) } }
        let expected: [UInt8] = [0x0A, 0x01, 0x6B, 0x12, 0xCB, 0x01, 0x0A, 0xC8, 0x01] + Array(value.utf8)
        #expect(writer.bytes == expected)
        var outer = ProtobufWriter()
        outer.writeMessageField(9) { OTLPTraceEncoder.write(.string("k", value), into: &$0) }
        #expect(outer.bytes == [0x4A, 0xD1, 0x01] + expected)
    }

    // MARK: - W3C context and sampling

    @Test func traceparentRoundTripsAndRefusesMalformedValues() throws {
        let text = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        let context = try #require(SpanContext(traceparent: text))
        #expect(context.traceHigh == 0x0af7_6519_16cd_43dd && context.traceLow == 0x8448_eb21_1c80_319c)
        #expect(context.spanID == 0xb7ad_6b71_6920_3331 && context.sampled)
        #expect(context.traceparent == text)
        #expect(context.traceIDText == "0af7651916cd43dd8448eb211c80319c")
        #expect(SpanContext(traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")?.sampled == false)
        for bad in [
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333x-01",
        ] {
            #expect(SpanContext(traceparent: bad) == nil, "\(bad)")
        }
    }

    @Test func theSamplerComparesTheTraceIDsRandomBitsWithTheRatio() {
        #expect(TraceSampler(ratio: 1).threshold == 0)
        #expect(TraceSampler(ratio: 0).threshold == 1 << 56)
        #expect(TraceSampler(ratio: 0.5).threshold == 1 << 55)
        #expect(TraceSampler(ratio: 0.01).threshold == UInt64((0.99 * Double(1 << 56)).rounded()))
        let half = TraceSampler(ratio: 0.5)
        #expect(half.samplesRoot(traceLow: 1 << 55))
        #expect(!half.samplesRoot(traceLow: (1 << 55) - 1))
        // The top byte is not part of the random bits.
        #expect(!half.samplesRoot(traceLow: 0xFF00_0000_0000_0000))
        #expect(!TraceSampler(ratio: 0).samplesRoot(traceLow: UInt64.max))
        #expect(TraceSampler(ratio: 1).samplesRoot(traceLow: 0))
        // Parent-based: the parent's flag wins over the ratio either way.
        let parent = SpanContext(traceHigh: 1, traceLow: 0, spanID: 2, sampled: true)
        #expect(TraceSampler(ratio: 0).samples(parent: parent, traceLow: 0))
        var unsampled = parent
        unsampled.sampled = false
        #expect(!TraceSampler(ratio: 1).samples(parent: unsampled, traceLow: UInt64.max))
    }

    @Test func theTracerIsOffByDefaultAndContinuesOrStartsTraces() throws {
        let tracer = Tracer(ids: TraceIDSource(seed: 42))
        #expect(tracer.start(incoming: nil) == nil)
        let queue = SpanQueue(capacity: 8)
        tracer.configure(sampler: TraceSampler(ratio: 0), queue: queue)
        let incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        let continued = try #require(tracer.start(incoming: incoming))
        #expect(continued.span.traceIDText == "0af7651916cd43dd8448eb211c80319c")
        #expect(continued.parentSpanID == 0xb7ad_6b71_6920_3331)
        #expect(continued.span.sampled, "the parent's sampled flag wins over ratio 0")
        #expect(continued.span.spanID != 0 && continued.upstreamSpanID != continued.span.spanID)
        #expect(continued.upstreamTraceparent.hasPrefix("00-0af7651916cd43dd8448eb211c80319c-"))
        #expect(continued.upstreamTraceparent.hasSuffix("-01"))
        // Not sampled: no trace at all (the request goes on as without tracing).
        #expect(tracer.start(incoming: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00") == nil)
        // Roots at ratio 0: none sampled; at ratio 1: all, new trace IDs each time.
        for _ in 0..<100 { #expect(tracer.start(incoming: nil) == nil) }
        tracer.configure(sampler: TraceSampler(ratio: 1), queue: queue)
        var traces = Set<String>()
        for _ in 0..<100 {
            let root = try #require(tracer.start(incoming: nil))
            #expect(root.span.sampled && root.parentSpanID == 0)
            traces.insert(root.span.traceIDText)
        }
        #expect(traces.count == 100)
        // At 0.5, the decision is the sampler's on the trace-id's random bits.
        tracer.configure(sampler: TraceSampler(ratio: 0.5), queue: queue)
        var sampled = 0
        for _ in 0..<1000 {
            guard let root = tracer.start(incoming: nil) else { continue }
            #expect(TraceSampler(ratio: 0.5).samplesRoot(traceLow: root.span.traceLow))
            sampled += 1
        }
        #expect(sampled > 0 && sampled < 1000)
        tracer.configure(sampler: nil, queue: nil)
        #expect(tracer.start(incoming: incoming) == nil)
    }

    // MARK: - The queue

    @Test func theQueueIsBoundedAndCountsWhatItDrops() {
        let registry = MetricsRegistry()
        let metrics = TracingMetrics(registry: registry)
        let queue = SpanQueue(capacity: 3, metrics: metrics)
        #expect(queue.offer([Self.span, Self.span]) == 2)
        #expect(queue.offer([Self.span, Self.span]) == 1)
        #expect(queue.offer([Self.span]) == 0)
        #expect(queue.count == 3 && queue.droppedCount == 2)
        let text = registry.render()
        #expect(text.contains("attest_gateway_trace_spans_dropped_total{reason=\"queue_full\"} 2"))
        #expect(text.contains("attest_gateway_trace_queue_spans 3"))
        #expect(queue.take(2).count == 2)
        #expect(queue.take(5).count == 1)
        #expect(queue.take(5).isEmpty)
        #expect(registry.render().contains("attest_gateway_trace_queue_spans 0"))
    }

    // MARK: - OTLP/HTTP

    @Test func answersAreClassifiedAsTheOTLPSpecificationSays() {
        #expect(OTLPHTTPRequest.outcome(status: 200, retryAfter: nil) == .accepted)
        #expect(OTLPHTTPRequest.outcome(status: 204, retryAfter: nil) == .accepted)
        for status in [429, 502, 503, 504] {
            #expect(OTLPHTTPRequest.outcome(status: status, retryAfter: nil) == .retry(afterSeconds: nil))
        }
        #expect(OTLPHTTPRequest.outcome(status: 503, retryAfter: "7") == .retry(afterSeconds: 7))
        #expect(
            OTLPHTTPRequest.outcome(status: 429, retryAfter: "Wed, 21 Oct 2015 07:28:00 GMT")
                == .retry(afterSeconds: nil))
        for status in [400, 401, 404, 413, 500] {
            #expect(OTLPHTTPRequest.outcome(status: status, retryAfter: "1") == .rejected)
        }
        #expect(OTLPHTTPRequest.backoffNanoseconds(attempt: 1, retryAfterSeconds: nil) == 1_000_000_000)
        #expect(OTLPHTTPRequest.backoffNanoseconds(attempt: 2, retryAfterSeconds: nil) == 2_000_000_000)
        #expect(OTLPHTTPRequest.backoffNanoseconds(attempt: 9, retryAfterSeconds: nil) == 30_000_000_000)
        #expect(OTLPHTTPRequest.backoffNanoseconds(attempt: 1, retryAfterSeconds: 600) == 60_000_000_000)
    }

    @Test func theExportRequestIsAProtobufPost() throws {
        let endpoint = try #require(TracingPolicy.Endpoint.parse("http://collector:4318"))
        let bytes = OTLPHTTPRequest.bytes(
            endpoint: endpoint, headers: [TracingPolicy.Header(name: "Authorization", value: "Bearer t")], body: [1, 2])
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == "POST /v1/traces HTTP/1.1\r\nHost: collector:4318\r\nContent-Type: application/x-protobuf\r\n"
                + "Content-Length: 2\r\nUser-Agent: attest-gateway\r\nConnection: close\r\nAuthorization: Bearer t\r\n\r\n\u{1}\u{2}"
        )
    }

    // MARK: - Configuration

    static let base = ReadinessPolicyTests.base

    @Test func endpointsParseAsCollectorURLs() {
        #expect(
            TracingPolicy.Endpoint.parse("http://otel:4318")
                == TracingPolicy.Endpoint(usesTLS: false, host: "otel", port: 4318, path: "/v1/traces"))
        #expect(
            TracingPolicy.Endpoint.parse("https://otel.example/custom/traces")
                == TracingPolicy.Endpoint(usesTLS: true, host: "otel.example", port: 443, path: "/custom/traces"))
        #expect(
            TracingPolicy.Endpoint.parse("http://[::1]:4318/", appendingTracesPath: true)
                == TracingPolicy.Endpoint(usesTLS: false, host: "::1", port: 4318, path: "/v1/traces"))
        #expect(
            TracingPolicy.Endpoint.parse("http://127.0.0.1:4318/otlp", appendingTracesPath: true)?.path
                == "/otlp/v1/traces")
        for bad in [
            "otel:4318", "ftp://otel", "http://", "http://otel:0", "http://otel:99999", "http://otel/a?b", "http://a b",
        ] {
            #expect(TracingPolicy.Endpoint.parse(bad) == nil, "\(bad)")
        }
    }

    @Test func theTracingBlockDecodesAndMistakesNameTheField() throws {
        #expect(!(try PolicyLoader.parse(Self.base, sourcePath: "/p.yaml").tracing.isActive))
        let policy = try PolicyLoader.parse(
            Self.base + """
                tracing:
                  endpoint: http://127.0.0.1:4318
                  sample_ratio: 0.25
                  headers: { Authorization: "Bearer abc" }
                  service_name: edge
                  resource_attributes: { deployment.environment: prod }
                  batch_size: 100
                  queue_size: 1000
                  timeout: 2s
                  export_interval: 500ms
                """, sourcePath: "/p.yaml")
        let tracing = policy.tracing
        #expect(tracing.isActive)
        #expect(tracing.endpoint?.port == 4318 && tracing.endpoint?.path == "/v1/traces")
        #expect(tracing.sampleRatio == 0.25)
        #expect(tracing.headers == [TracingPolicy.Header(name: "Authorization", value: "Bearer abc")])
        #expect(tracing.effectiveServiceName == "edge")
        #expect(tracing.resourceAttributes == [TracingPolicy.Attribute(key: "deployment.environment", value: "prod")])
        #expect(tracing.batchSize == 100 && tracing.queueSize == 1000)
        #expect(tracing.timeout == .seconds(2) && tracing.exportInterval == .milliseconds(500))
        let cases: [(String, PolicyError.Code, String)] = [
            ("tracing: { endpoint: otel:4318 }", .invalidValue, "tracing.endpoint"),
            ("tracing: { sample_ratio: 1.5 }", .outOfRange, "tracing.sample_ratio"),
            ("tracing: { sample_ratio: half }", .wrongType, "tracing.sample_ratio"),
            ("tracing: { batch_size: 0 }", .outOfRange, "tracing.batch_size"),
            ("tracing: { timeout: 1ms }", .outOfRange, "tracing.timeout"),
            ("tracing: { headers: { \"a b\": c } }", .invalidValue, "tracing.headers.a b"),
            ("tracing: { batch_size: 10, queue_size: 5 }", .conflictingKeys, "tracing.batch_size"),
            ("tracing: { sampler: always_on }", .unknownKey, "tracing.sampler"),
        ]
        ReadinessPolicyTests.expectRefusals(cases)
    }

    @Test func headersSentInClearToARemoteCollectorAreWarnedAbout() throws {
        var warnings: [PolicyWarning] = []
        let remote = Self.base + "tracing: { endpoint: \"http://otel.example:4318\", headers: { Authorization: x } }"
        _ = try PolicyLoader.parse(
            remote, sourcePath: "/p.yaml", environment: PolicyEnvironment([:]), warnings: &warnings)
        let warning = try #require(warnings.first { $0.code == "tracing_headers_in_clear" })
        #expect(warning.line == 7 && warning.field == "tracing.headers")
        for quiet in [
            "tracing: { endpoint: \"https://otel.example:4318\", headers: { Authorization: x } }",
            "tracing: { endpoint: \"http://127.0.0.1:4318\", headers: { Authorization: x } }",
            "tracing: { endpoint: \"http://otel.example:4318\" }",
        ] {
            var none: [PolicyWarning] = []
            _ = try PolicyLoader.parse(
                Self.base + quiet, sourcePath: "/p.yaml", environment: PolicyEnvironment([:]), warnings: &none)
            #expect(!none.contains { $0.code == "tracing_headers_in_clear" }, "\(quiet)")
        }
    }

    @Test func environmentVariablesFillWhatTheFileLeavesOut() throws {
        let fromEnvironment = try TracingPolicy().resolved(environment: [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
            "OTEL_EXPORTER_OTLP_HEADERS": "api-key=s%20ecret,x-tenant=a",
            "OTEL_SERVICE_NAME": "gw",
            "OTEL_RESOURCE_ATTRIBUTES": "service.name=ignored,deployment.environment=staging",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.01",
        ])
        #expect(fromEnvironment.isActive)
        #expect(fromEnvironment.endpoint?.description == "http://collector:4318/v1/traces")
        #expect(
            fromEnvironment.headers == [
                TracingPolicy.Header(name: "api-key", value: "s ecret"),
                TracingPolicy.Header(name: "x-tenant", value: "a"),
            ])
        #expect(fromEnvironment.effectiveServiceName == "gw")
        #expect(
            fromEnvironment.resourceAttributes == [
                TracingPolicy.Attribute(key: "deployment.environment", value: "staging")
            ])
        #expect(fromEnvironment.sampleRatio == 0.01)
        // The traces endpoint is used as it is and wins over the base URL.
        let traces = try TracingPolicy().resolved(environment: [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:2/t",
        ])
        #expect(traces.endpoint?.description == "http://b:2/t")
        // The file wins over the variables; OTEL_SDK_DISABLED wins over both.
        var file = TracingPolicy()
        file.endpoint = TracingPolicy.Endpoint.parse("http://file:4318")
        file.sampleRatio = 0.5
        file.serviceName = "from-file"
        let merged = try file.resolved(environment: [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_TRACES_SAMPLER_ARG": "0.1",
            "OTEL_SERVICE_NAME": "env",
        ])
        #expect(
            merged.endpoint?.host == "file" && merged.sampleRatio == 0.5 && merged.effectiveServiceName == "from-file")
        #expect(!(try file.resolved(environment: ["OTEL_SDK_DISABLED": "true"]).isActive))
        #expect(try TracingPolicy().resolved(environment: [:]).isActive == false)
        #expect(
            try TracingPolicy().resolved(environment: ["OTEL_TRACES_SAMPLER": "parentbased_always_off"]).sampleRatio
                == 0)
        for (name, value) in [
            ("OTEL_SDK_DISABLED", "maybe"), ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"),
            ("OTEL_TRACES_SAMPLER", "jaeger_remote"), ("OTEL_TRACES_SAMPLER_ARG", "2"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"), ("OTEL_RESOURCE_ATTRIBUTES", "a=%zz"),
        ] {
            do {
                _ = try TracingPolicy().resolved(environment: [name: value])
                Issue.record("accepted \(name)=\(value)")
            } catch {
                #expect(error.field == name && error.file == "environment", "\(error)")
                #expect(!error.message.contains(value), "a variable's value is never quoted")
            }
        }
    }

    // MARK: - The proxy's hook

    @Test func theUpstreamTraceparentNamesTheGatewaysSpan() throws {
        var headers = HTTPHeaders()
        headers.add(name: "traceparent", value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        headers.add(name: "tracestate", value: "v=1")
        headers.add(name: "Accept", value: "*/*")
        let head = HTTPRequestHead(method: "GET", target: "/", headers: headers)
        var correlation = RequestCorrelation.scan(headers, peerIsTrusted: false) { RequestID(high: 1, low: 2) }
        #expect(correlation.trace == nil, "tracing is off in the process's tracer")
        let (same, _) = ExchangeTracing.upstream(head, correlation)
        #expect(same.headers.values(for: "traceparent") == [headers.values(for: "traceparent")[0]])

        let trace = RequestTrace(
            span: try #require(SpanContext(traceparent: headers.values(for: "traceparent")[0])), parentSpanID: 7,
            upstreamSpanID: 0xABCD)
        correlation.trace = trace
        let (rewritten, forwarded) = ExchangeTracing.upstream(head, correlation)
        #expect(
            rewritten.headers.values(for: "traceparent") == ["00-0af7651916cd43dd8448eb211c80319c-000000000000abcd-01"])
        #expect(rewritten.headers.values(for: "tracestate") == ["v=1"])
        #expect(forwarded.traceparent == "00-0af7651916cd43dd8448eb211c80319c-000000000000abcd-01")
        // An invalid incoming traceparent: replaced, and its tracestate dropped.
        var invalid = HTTPHeaders()
        invalid.add(name: "traceparent", value: "garbage")
        invalid.add(name: "tracestate", value: "v=1")
        var started = RequestCorrelation.scan(invalid, peerIsTrusted: false) { RequestID(high: 1, low: 2) }
        started.trace = trace
        let (fresh, _) = ExchangeTracing.upstream(
            HTTPRequestHead(method: "GET", target: "/", headers: invalid), started)
        #expect(fresh.headers.values(for: "traceparent").count == 1)
        #expect(fresh.headers.values(for: "tracestate").isEmpty)
    }

    @Test func theStoreCallIsAClientSpanUnderTheGateSpan() {
        let call = StoreCallSpan(
            system: .redis, operation: .advanceCounter, outcome: .advanced, start: 1_000, end: 4_000)
        let span = call.finished(traceHigh: 5, traceLow: 6, gateSpanID: 0x77) { 10_000 + $0 }
        #expect(span.traceHigh == 5 && span.traceLow == 6)
        #expect(span.parentSpanID == 0x77)
        #expect(span.spanID == StoreCallSpan.spanID(underGate: 0x77))
        #expect(span.spanID != 0 && span.spanID != 0x77)
        #expect(span.name == "store counter")
        #expect(span.kind == .client)
        #expect(span.startUnixNano == 11_000 && span.endUnixNano == 14_000)
        #expect(!span.isError)
        #expect(
            span.attributes == [
                .string("db.system.name", "redis"), .string("db.system", "redis"),
                .string("db.operation.name", "EVALSHA"), .string("attest_gateway.store.outcome", "advanced"),
            ])
        let failed = StoreCallSpan(system: .memory, operation: .advanceCounter, outcome: .error, start: 9, end: 5)
            .finished(traceHigh: 5, traceLow: 6, gateSpanID: 0x77) { $0 }
        #expect(failed.isError && failed.statusMessage == "store_error")
        #expect(failed.endUnixNano == failed.startUnixNano, "never ends before it starts")
        #expect(failed.attributes.contains(.string("db.system.name", "memory")))
        let recorder = StoreCallRecorder()
        #expect(recorder.recorded == nil)
        recorder.record(call)
        #expect(recorder.recorded == call)
    }

    @Test func aSampledExchangeWithAStoreCallHasItsSpanUnderTheGate() throws {
        var exchange = RequestExchange(clientLimitKey: "k", clientAddress: "127.0.0.1")
        var correlation = RequestCorrelation.scan(HTTPHeaders(), peerIsTrusted: false) { RequestID(high: 1, low: 2) }
        let trace = RequestTrace(
            span: SpanContext(traceHigh: 1, traceLow: 2, spanID: 3, sampled: true), parentSpanID: 0,
            upstreamSpanID: 0x99)
        correlation.trace = trace
        exchange.correlation = correlation
        exchange.requestStart = 100
        exchange.gateAsked = true
        var info = GateLogInfo(verdict: .verified, keyID: "secret-key-id")
        info.storeCall = StoreCallSpan(
            system: .redis, operation: .advanceCounter, outcome: .notIncreasing, start: 200, end: 300)
        exchange.logInfo = info
        let spans = ExchangeTracing.spans(of: exchange, now: 1_000, wallNow: 50_000, httpProtocol: "http/1.1")
        let gate = try #require(spans.first { $0.name == "gate" })
        let store = try #require(spans.first { $0.name == "store counter" })
        #expect(store.parentSpanID == gate.spanID)
        #expect(store.startUnixNano == 49_200 && store.endUnixNano == 49_300)
        #expect(store.attributes.contains(.string("attest_gateway.store.outcome", "not_increasing")))
        #expect(!"\(spans)".contains("secret-key-id"))
        // Without a store call (a refusal before it): no store span.
        exchange.logInfo = GateLogInfo(verdict: .missing)
        #expect(
            !ExchangeTracing.spans(of: exchange, now: 1_000, wallNow: 50_000, httpProtocol: "http/1.1")
                .contains { $0.name == "store counter" })
    }

    @Test func everyTracingKeyIsDocumented() throws {
        let documented = OperationsDocTests.tableKeys(
            try ProtocolDocTests.read("docs/operations.md"), section: "`tracing`")
        #expect(documented == Set(PolicyDecoder.tracingKeys))
    }

    @Test func everyTracingLabelValueIsDocumented() throws {
        #expect(
            try MetricLabelDocTests.undocumented(
                TracingMetrics.dropReasons, in: "attest_gateway_trace_spans_dropped_total") == [])
        #expect(
            try MetricLabelDocTests.undocumented(
                TracingMetrics.errorKinds, in: "attest_gateway_trace_export_errors_total") == [])
        _ = try MetricLabelDocTests.row("attest_gateway_trace_spans_exported_total")
        _ = try MetricLabelDocTests.row("attest_gateway_trace_queue_spans")
    }
}
