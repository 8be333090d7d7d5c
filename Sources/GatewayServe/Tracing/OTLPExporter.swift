import GatewayIO
import HTTP1
import PolicyModel

/// Sends the queued spans to an OTLP/HTTP collector, in batches, from an event loop of its
/// own (never one that serves requests): every 100 ms it looks at `SpanQueue`, and when a
/// batch is full or `exportInterval` has passed it takes at most `batchSize` spans, encodes
/// them (`OTLPTraceEncoder`) and `POST`s them over an `OutboundConnection` (plain or TLS,
/// non-blocking; the name is resolved on a resolver queue). One export at a time.
///
/// Each attempt has one deadline (`timeout`: resolve, connect, handshake, answer head). A
/// connect failure, a timeout or a retryable status (429, 502, 503, 504) tries the batch
/// again after a backoff (`Retry-After` when given), up to `maximumAttempts`; then the batch
/// is dropped (`export_failed`). Another status drops it at once (`rejected`). While an export
/// waits, spans keep arriving in the bounded queue, which drops what does not fit
/// (`queue_full`): a slow or dead collector costs the requests nothing.
///
/// Confinement: every member is used only on `loop` (hence `@unchecked Sendable`).
final class OTLPExporter: OutboundConnectionDelegate, @unchecked Sendable {
    struct Settings: Sendable {
        var endpoint: TracingPolicy.Endpoint
        var headers: [TracingPolicy.Header]
        var batchSize: Int
        var intervalNanoseconds: UInt64
        var timeoutNanoseconds: UInt64
        var encoder: OTLPTraceEncoder
        var tls: TLSClientContext?
    }

    /// Tries per batch (the first and two retries).
    static let maximumAttempts = 3
    static let pollNanoseconds: UInt64 = 100_000_000
    static let resolver = HostResolver(label: "attest-gateway.otlp.resolver")

    let loop: EventLoop
    private var queue: SpanQueue
    private let metrics: TracingMetrics
    private var settings: Settings
    private var batch: [FinishedSpan] = []
    private var request: [UInt8] = []
    private var attempt = 0
    private var connection: OutboundConnection?
    private var parser = HTTPResponseParser()
    private var received: [UInt8] = []
    /// Bumped when an attempt ends: a late timer or DNS answer compares it.
    private var sequence: UInt64 = 0
    /// An attempt or its backoff is under way.
    private var busy = false
    private var lastExport: UInt64 = SystemCalls.monotonicNanoseconds()
    private var stopped = false
    /// A flush at shutdown is under way (`flush`): called once it is over.
    private var flushed: (@Sendable () -> Void)?
    private var address: (host: String, port: UInt16, address: SocketAddress)?

    init(loop: EventLoop, queue: SpanQueue, metrics: TracingMetrics, settings: Settings) {
        self.loop = loop
        self.queue = queue
        self.metrics = metrics
        self.settings = settings
    }

    func start() {
        self.loop.execute { self.poll() }
    }

    /// New settings (a reload) for the next export; the one under way finishes with the old.
    func update(_ settings: Settings, queue: SpanQueue) {
        self.loop.execute {
            if self.settings.endpoint != settings.endpoint { self.address = nil }
            self.settings = settings
            self.queue = queue
        }
    }

    /// Stops polling; an export under way is abandoned (its spans counted as `export_failed`).
    func stop() {
        self.loop.execute {
            self.stopped = true
            self.sequence &+= 1
            self.closeConnection()
            self.dropBatch(self.metrics.droppedExportFailed)
        }
    }

    /// Sends what is queued, then stops (the process is exiting; the tracer no longer adds
    /// spans). Bounded by one export `timeout` in all: whatever is not sent by then, and a batch
    /// whose attempt fails (no retry now), is dropped (`export_failed`). `completion` runs once,
    /// on the exporter's loop.
    func flush(completion: @escaping @Sendable () -> Void) {
        self.loop.execute {
            guard !self.stopped, self.flushed == nil else {
                completion()
                return
            }
            self.flushed = completion
            self.loop.schedule(after: self.settings.timeoutNanoseconds) { self.finishFlush() }
            self.flushStep()
        }
    }

    /// During a flush: the next batch once the export under way is over, or the end.
    private func flushStep() {
        guard self.flushed != nil, !self.busy else { return }
        guard self.queue.count > 0 else {
            self.finishFlush()
            return
        }
        self.export()
    }

    private func finishFlush() {
        guard let completion = self.flushed else { return }
        self.flushed = nil
        self.stopped = true
        self.sequence &+= 1
        self.closeConnection()
        self.dropBatch(self.metrics.droppedExportFailed)
        let left = self.queue.take(self.queue.count)
        if !left.isEmpty { self.metrics.droppedExportFailed.increment(by: UInt64(left.count)) }
        completion()
    }

    // MARK: - Batches

    private func poll() {
        guard !self.stopped else { return }
        self.loop.schedule(after: Self.pollNanoseconds) { self.poll() }
        guard !self.busy else { return }
        let now = SystemCalls.monotonicNanoseconds()
        let waiting = self.queue.count
        guard waiting > 0 else {
            self.lastExport = now
            return
        }
        guard waiting >= self.settings.batchSize || now &- self.lastExport >= self.settings.intervalNanoseconds else {
            return
        }
        self.lastExport = now
        self.export()
    }

    /// Takes a batch from the queue and sends it.
    private func export() {
        self.batch = self.queue.take(self.settings.batchSize)
        guard !self.batch.isEmpty else {
            self.flushStep()
            return
        }
        self.request = OTLPHTTPRequest.bytes(
            endpoint: self.settings.endpoint, headers: self.settings.headers,
            body: self.settings.encoder.encode(self.batch))
        self.attempt = 0
        self.busy = true
        self.send()
    }

    private func send() {
        self.attempt += 1
        self.sequence &+= 1
        let sequence = self.sequence
        self.loop.schedule(after: self.settings.timeoutNanoseconds) {
            guard sequence == self.sequence else { return }
            self.failed(self.metrics.errorTimeout)
        }
        let endpoint = self.settings.endpoint
        if let cached = self.address, cached.host == endpoint.host, cached.port == endpoint.port {
            self.connect(cached.address)
            return
        }
        Self.resolver.resolve(host: endpoint.host, port: endpoint.port) { result in
            self.loop.execute {
                guard sequence == self.sequence else { return }
                switch result {
                case .success(let address):
                    self.address = (endpoint.host, endpoint.port, address)
                    self.connect(address)
                case .failure:
                    self.failed(self.metrics.errorConnect)
                }
            }
        }
    }

    private func connect(_ address: SocketAddress) {
        let endpoint = self.settings.endpoint
        self.parser = HTTPResponseParser()
        self.parser.expectResponse(toMethod: "POST")
        self.received = []
        do {
            let connection = try OutboundConnection.open(
                to: .tcp(address),
                tls: self.settings.tls.map {
                    OutboundTLS(context: $0, serverName: endpoint.host, port: Int(endpoint.port))
                },
                loop: self.loop, connectTimeout: self.settings.timeoutNanoseconds, delegate: self)
            self.connection = connection
            if connection.isOpen { self.write() }
        } catch {
            self.address = nil
            self.failed(self.metrics.errorConnect)
        }
    }

    private func write() {
        guard let connection = self.connection else { return }
        if !self.request.isEmpty {
            connection.send(self.request)
            self.request.removeAll(keepingCapacity: false)
        }
        do throws(TransportError) {
            try connection.flush()
        } catch {
            self.failed(self.metrics.errorConnect)
            return
        }
        self.read()
    }

    private func read() {
        while let connection = self.connection {
            let outcome: SocketChannel.ReadOutcome
            do {
                outcome = try connection.channel.readOnce()
            } catch {
                self.failed(self.metrics.errorConnect)
                return
            }
            switch outcome {
            case .scratch(let bytes):
                self.received.append(contentsOf: bytes)
                if self.parseAnswer() { return }
            case .appended:
                break
            case .endOfFile:
                self.failed(self.metrics.errorConnect)
                return
            case .wouldBlock:
                return
            }
        }
    }

    /// True when the answer's head is in (the attempt is over).
    private func parseAnswer() -> Bool {
        while true {
            let (event, consumed) = self.received.withUnsafeBytes { self.parser.next($0) }
            if consumed > 0 { self.received.removeFirst(consumed) }
            switch event {
            case .head(let head, _)?:
                self.answered(OTLPHTTPRequest.outcome(status: head.status, retryAfter: head.headers["Retry-After"]))
                return true
            case .error?:
                self.failed(self.metrics.errorStatus)
                return true
            case nil:
                if consumed == 0 { return false }
            case .informational?, .rawHead?, .body?, .end?:
                continue
            }
        }
    }

    // MARK: - Outcomes

    private func answered(_ outcome: OTLPHTTPRequest.Outcome) {
        self.sequence &+= 1
        self.closeConnection()
        switch outcome {
        case .accepted:
            self.metrics.exported.increment(by: UInt64(self.batch.count))
            self.batch = []
            self.busy = false
            self.flushStep()
        case .retry(let seconds):
            self.metrics.errorRetryableStatus.increment()
            self.retryOrDrop(afterSeconds: seconds)
        case .rejected:
            self.metrics.errorStatus.increment()
            self.dropBatch(self.metrics.droppedRejected)
            self.flushStep()
        }
    }

    private func failed(_ kind: Counter) {
        guard self.busy, !self.batch.isEmpty else { return }
        self.sequence &+= 1
        self.closeConnection()
        kind.increment()
        self.retryOrDrop(afterSeconds: nil)
    }

    private func retryOrDrop(afterSeconds: Int?) {
        if self.flushed != nil {
            // Exiting: the collector failed once, so what is left is dropped at once.
            self.finishFlush()
            return
        }
        guard !self.stopped, self.attempt < Self.maximumAttempts else {
            self.dropBatch(self.metrics.droppedExportFailed)
            return
        }
        self.request = OTLPHTTPRequest.bytes(
            endpoint: self.settings.endpoint, headers: self.settings.headers,
            body: self.settings.encoder.encode(self.batch))
        let sequence = self.sequence
        let delay = OTLPHTTPRequest.backoffNanoseconds(attempt: self.attempt, retryAfterSeconds: afterSeconds)
        self.loop.schedule(after: delay) {
            guard sequence == self.sequence, !self.stopped else { return }
            self.send()
        }
    }

    private func dropBatch(_ reason: Counter) {
        if !self.batch.isEmpty { reason.increment(by: UInt64(self.batch.count)) }
        self.batch = []
        self.busy = false
    }

    private func closeConnection() {
        guard let connection = self.connection else { return }
        self.connection = nil
        connection.close()
    }

    // MARK: - OutboundConnectionDelegate

    func outboundOpened(_ connection: OutboundConnection) {
        guard connection === self.connection else { return }
        self.write()
    }

    func outboundEvents(_ connection: OutboundConnection, _ events: UInt32) {
        guard connection === self.connection else { return }
        self.write()
    }

    func outboundFailed(_ connection: OutboundConnection, _ reason: OutboundCloseReason) {
        guard connection === self.connection else { return }
        self.connection = nil
        switch reason {
        case .timedOut: self.failed(self.metrics.errorTimeout)
        case .connectFailed, .tlsFailed, .closedByOwner:
            self.address = nil
            self.failed(self.metrics.errorConnect)
        }
    }
}
