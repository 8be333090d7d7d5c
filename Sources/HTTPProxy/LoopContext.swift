import GatewayIO

/// Per-loop state of the server: its connections, metric handles, access-log lines and a
/// scratch memory for message heads. Confined to `loop` (so `@exclusivity(unchecked)`, see `ProxyConnection`).
final class LoopContext: @unchecked Sendable {
    let loop: EventLoop
    let metricsCache: ProxyMetricsCache
    let accessLog: AccessLog?
    @exclusivity(unchecked) var logBuffer: AccessLogBuffer
    /// This loop's TLS connections (clients, pooled upstreams) whose record buffers go back once idle.
    let tlsBufferSweep = TLSIdleBufferSweep()
    /// This loop's `X-Request-Id`s.
    @exclusivity(unchecked) var requestIDs: RequestIDGenerator
    @exclusivity(unchecked) private(set) var connections: [ObjectIdentifier: ProxyConnection] = [:]
    /// Connections still reading their PROXY protocol header (not yet a `ProxyConnection`).
    @exclusivity(unchecked) private var headerReaders: [ObjectIdentifier: ProxyHeaderReader] = [:]
    /// Serialization scratch (heads, chunk framing); used and emptied within one call.
    @exclusivity(unchecked) var scratchBytes: [UInt8] = []
    /// HTTP/2 connections to pump once this batch of events is handled (`pumpAtBatchEnd`).
    private let batchEndPumps = BatchEndQueue<HTTP2ServerConnection>()
    @exclusivity(unchecked) private var headScratchMemory = UnsafeMutableRawBufferPointer.allocate(
        byteCount: 16 * 1024, alignment: 16)

    init(loop: EventLoop, metrics: ProxyMetrics, accessLog: AccessLog?) {
        self.loop = loop
        self.metricsCache = ProxyMetricsCache(metrics: metrics)
        self.accessLog = accessLog
        self.logBuffer = AccessLogBuffer(loopIndex: loop.index)
        self.requestIDs = RequestIDGenerator(loopIndex: loop.index)
        self.scratchBytes.reserveCapacity(16 * 1024)
    }

    deinit {
        self.headScratchMemory.deallocate()
    }

    func installBatchHook() {
        self.loop.assertInLoop()
        // Weak, not unowned: the loop outlives its context when `serve` gives up before it
        // serves (a bad policy at start drops the server while the loops still tick), and an
        // unowned read of the freed context aborted the process (seen as exit status 134).
        self.loop.onBatchEnd = { [weak self] isTick in
            guard let self else { return }
            self.runBatchEndPumps()
            // Hand lines over once 16 KiB have gathered, or at the next tick (<= 100 ms later):
            // one log-queue wake-up and one write(2) per many requests, not per batch.
            if isTick || self.logBuffer.byteCount >= Self.accessLogFlushBytes { self.flushAccessLog() }
            if isTick { self.tlsBufferSweep.sweep() }
        }
    }

    static let accessLogFlushBytes = 16 * 1024

    /// `connection` pumps after the events of this turn (each at most once: its own flag).
    func pumpAtBatchEnd(_ connection: HTTP2ServerConnection) {
        self.batchEndPumps.append(connection)
    }

    /// A pump may queue more: a few rounds run here; what is still queued after them runs on the
    /// loop's next turn (submitted work wakes the loop, so nothing waits for a timer).
    private func runBatchEndPumps() {
        guard !self.batchEndPumps.isEmpty else { return }
        let left = self.batchEndPumps.run(rounds: Self.batchEndPumpRounds) { $0.runPumpAtBatchEnd() }
        if left { self.loop.execute { [self] in self.runBatchEndPumps() } }
    }

    static let batchEndPumpRounds = 4

    func flushAccessLog() {
        guard !self.logBuffer.isEmpty, let accessLog = self.accessLog else { return }
        let (bytes, lines) = self.logBuffer.take()
        accessLog.submit(bytes, lineCount: lines)
    }

    func add(_ connection: ProxyConnection) {
        self.connections[ObjectIdentifier(connection)] = connection
    }

    func remove(_ connection: ProxyConnection) {
        self.connections.removeValue(forKey: ObjectIdentifier(connection))
    }

    func add(_ reader: ProxyHeaderReader) {
        self.headerReaders[ObjectIdentifier(reader)] = reader
    }

    func remove(_ reader: ProxyHeaderReader) {
        self.headerReaders.removeValue(forKey: ObjectIdentifier(reader))
    }

    /// Memory to write a message head in before copying it out (`UpstreamRequestPlan.writeHead`);
    /// used and done with within one call. Grows to the largest head seen.
    func headScratch(atLeast count: Int) -> UnsafeMutableRawBufferPointer {
        if self.headScratchMemory.count < count {
            self.headScratchMemory.deallocate()
            self.headScratchMemory = .allocate(byteCount: max(count, 16 * 1024), alignment: 16)
        }
        return self.headScratchMemory
    }

    func drainConnections() {
        self.loop.assertInLoop()
        // No request has started on them: they close like idle keep-alive connections.
        for reader in Array(self.headerReaders.values) { reader.forceClose() }
        for connection in Array(self.connections.values) {
            connection.beginDrain()
        }
        self.flushAccessLog()
    }

    func closeEverything() {
        self.loop.assertInLoop()
        for reader in Array(self.headerReaders.values) { reader.forceClose() }
        for connection in Array(self.connections.values) {
            connection.forceClose()
        }
        self.flushAccessLog()
    }
}
