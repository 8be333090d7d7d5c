import Foundation
package import GatewayIO
package import PolicyModel
import Synchronization

/// Composition of tracing (docs/operations.md "Traces"): applies `tracing:` completed by the
/// `OTEL_*` environment (`TracingPolicy.resolved`) at start and on every reload, turns
/// `Tracer.process` on or off with the new sampler, and runs one `OTLPExporter` on an event
/// loop of its own (made the first time tracing is on).
package final class TraceExportController: Sendable {
    private struct Running {
        var exporter: OTLPExporter
        var queue: SpanQueue
        var loop: EventLoop
    }

    package let metrics: TracingMetrics
    private let tracer: Tracer
    private let environment: @Sendable () -> [String: String]
    private let running = Mutex<Running?>(nil)

    package init(
        registry: MetricsRegistry, tracer: Tracer = .process,
        environment: @escaping @Sendable () -> [String: String] = { ProcessInfo.processInfo.environment }
    ) {
        self.metrics = TracingMetrics(registry: registry)
        self.tracer = tracer
        self.environment = environment
    }

    /// Applies `policy`; a malformed `OTEL_*` variable or an unusable TLS setup throws and
    /// changes nothing.
    package func apply(_ policy: TracingPolicy) throws {
        let resolved = try policy.resolved(environment: self.environment())
        guard resolved.isActive, let endpoint = resolved.endpoint else {
            self.tracer.configure(sampler: nil, queue: nil)
            return
        }
        var resource: [SpanAttribute] = [.string("service.name", resolved.effectiveServiceName)]
        for attribute in resolved.resourceAttributes { resource.append(.string(attribute.key, attribute.value)) }
        resource.append(.string("telemetry.sdk.name", "attest-gateway"))
        resource.append(.string("telemetry.sdk.language", "swift"))
        let settings = OTLPExporter.Settings(
            endpoint: endpoint, headers: resolved.headers, batchSize: resolved.effectiveBatchSize,
            intervalNanoseconds: Self.nanoseconds(resolved.effectiveExportInterval),
            timeoutNanoseconds: Self.nanoseconds(resolved.effectiveTimeout),
            encoder: OTLPTraceEncoder(resource: resource, scopeName: "attest-gateway"),
            tls: endpoint.usesTLS ? try TLSClientContext(settings: TLSClientSettings(sessionCacheCapacity: 4)) : nil)
        let queue = try self.running.withLock { running throws -> SpanQueue in
            if var current = running {
                if current.queue.capacity != resolved.effectiveQueueSize {
                    current.queue = SpanQueue(capacity: resolved.effectiveQueueSize, metrics: self.metrics)
                }
                current.exporter.update(settings, queue: current.queue)
                running = current
                return current.queue
            }
            let queue = SpanQueue(capacity: resolved.effectiveQueueSize, metrics: self.metrics)
            let loop = try EventLoop(index: Self.loopIndex)
            let exporter = OTLPExporter(loop: loop, queue: queue, metrics: self.metrics, settings: settings)
            exporter.start()
            running = Running(exporter: exporter, queue: queue, loop: loop)
            return queue
        }
        self.tracer.configure(sampler: TraceSampler(ratio: resolved.effectiveSampleRatio), queue: queue)
        Log.info(
            "tracing_enabled",
            [
                ("endpoint", endpoint.description), ("sample_ratio", String(resolved.effectiveSampleRatio)),
                ("service_name", resolved.effectiveServiceName),
            ])
    }

    /// Stops making spans and the exporter (the process is exiting).
    package func stop() {
        self.tracer.configure(sampler: nil, queue: nil)
        self.running.withLock { $0?.exporter.stop() }
    }

    /// Stops making spans, sends those still queued, then stops the exporter: at shutdown,
    /// after the drain. Bounded by the export `timeout` (`OTLPExporter.flush`); `completion`
    /// runs once, at once when tracing never ran, else on the exporter's loop.
    package func stop(flushing completion: @escaping @Sendable () -> Void) {
        self.tracer.configure(sampler: nil, queue: nil)
        guard let exporter = self.running.withLock({ $0?.exporter }) else {
            completion()
            return
        }
        exporter.flush(completion: completion)
    }

    /// The exporter loop's index (its thread's label; no request ever runs on it).
    static let loopIndex = 999

    static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(seconds, 0)) &* 1_000_000_000 &+ UInt64(max(attoseconds, 0) / 1_000_000_000)
    }
}
