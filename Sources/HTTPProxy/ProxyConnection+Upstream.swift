import GateContract
import GatewayIO
import HTTP1

/// The upstream side of an exchange: the upstream request, leasing a connection, relaying the
/// response to the client re-framed, and upstream failures.
extension ProxyConnection {
    /// The upstream request head (`UpstreamRequestPlan`) into `requestBytes`, written in the
    /// loop's head scratch memory first (one copy into the array, no per-field appends).
    func writeUpstreamHead(_ head: HTTPRequestHead, target: UpstreamTarget) -> BodyEncoding {
        let requestID = self.requestID  // set with the head; made here only if it was not
        let (head, correlation) = ExchangeTracing.upstream(
            head, self.exchange.correlation ?? RequestCorrelation(requestID: requestID))
        let bound = UpstreamRequestPlan.headBound(
            gateHead: head, client: &self.forwardedClient, upstreamHost: target.hostHeader,
            requestID: requestID)
        let memory = self.loopContext.headScratch(atLeast: bound)
        var writer = HeadWriter(UnsafeMutableRawBufferPointer(rebasing: memory[0..<bound]))
        let encoding = UpstreamRequestPlan.writeHead(
            gateHead: head, framing: self.exchange.info?.framing ?? .none,
            bufferedBodyCount: self.exchange.bufferedBody?.count,
            client: &self.forwardedClient, upstreamHost: target.hostHeader, correlation: correlation,
            upgradesToWebSocket: self.exchange.websocketKey != nil, into: &writer)
        self.requestBytes.removeAll(keepingCapacity: true)
        UnsafeRawBufferPointer(rebasing: memory[0..<writer.count]).withMemoryRebound(to: UInt8.self) {
            self.requestBytes.append(contentsOf: $0)
        }
        return encoding
    }

    // MARK: - Leasing

    func acquireUpstream(fresh: Bool) {
        guard let target = self.exchange.target else { preconditionFailure("upstream lease without a target") }
        let pool = target.pools[self.loop.index]
        switch pool.acquire(for: self, fresh: fresh) {
        case .ready(let connection):
            self.attach(connection)
        case .connecting:
            break
        case .queued:
            self.waitingPool = pool
        case .failed:
            self.handleUpstreamFailure(.unavailable, wasIdle: false, anyByte: false)
        case .exhausted:
            self.handleUpstreamFailure(.poolExhausted, wasIdle: false, anyByte: false)
        }
    }

    private func attach(_ connection: UpstreamConnection) {
        self.upstream = connection
        self.machine.upstreamConnected()
        self.exchange.upstreamStart = SystemCalls.monotonicNanoseconds()
        connection.send(
            request: self.requestBytes, method: self.exchange.head?.method ?? "GET",
            upgrade: self.exchange.websocketKey != nil)
        self.repump = true
    }

    func releaseUpstream(_ connection: UpstreamConnection, reusable: Bool) {
        if self.upstream === connection { self.upstream = nil }
        connection.pool.release(connection, reusable: reusable)
    }

    func cancelWaiting() {
        if let pool = self.waitingPool {
            pool.cancelWait(self)
            self.waitingPool = nil
        }
    }

    func flushUpstream() {
        guard let upstream = self.upstream else { return }
        let wasBackedUp = upstream.unsentRequestBytes > Self.highWaterMark
        if !upstream.flushRequest() {
            self.upstreamBroke(upstream)
            return
        }
        if wasBackedUp && upstream.unsentRequestBytes <= Self.highWaterMark { self.repump = true }
    }

    // MARK: - UpstreamLessee

    func upstreamReady(_ connection: UpstreamConnection) {
        self.loop.assertInLoop()
        guard !self.machine.isClosed, self.machine.phase == .connecting else {
            // The lease arrived after the client went away: give it back.
            // No request was written on this lease: the connection is clean.
            connection.pool.release(connection, reusable: true)
            return
        }
        self.waitingPool = nil
        self.attach(connection)
        self.pump()
    }

    func upstreamFailed(_ failure: ProxyConnectionStateMachine.UpstreamFailure) {
        self.loop.assertInLoop()
        guard !self.machine.isClosed, self.machine.phase == .connecting else { return }
        self.waitingPool = nil
        self.handleUpstreamFailure(failure, wasIdle: false, anyByte: false)
        self.pump()
    }

    func upstreamEvents(_ connection: UpstreamConnection) {
        self.loop.assertInLoop()
        guard connection === self.upstream else { return }
        self.pump()
    }

    var acceptsResponseBytes: Bool {
        // A tunnel's bytes are `TunnelRelay`'s, never parsed as a response.
        !self.clientIsBackedUp && !self.machine.isClosed && self.machine.phase != .tunnelling
    }

    func upstreamResponse(
        _ event: HTTPResponseEvent, in slice: UnsafeRawBufferPointer, from connection: UpstreamConnection
    ) {
        switch event {
        case .informational(let head):
            // 100 is the gateway's own business (it answered Expect itself); others (103) go to 1.1 clients.
            if head.status != 100 && (self.exchange.head?.versionMinor ?? 1) >= 1 {
                var bytes = self.takeScratchBytes()
                HTTPSerializer.writeResponseHead(HeaderRewriting.clientResponse(head), into: &bytes)
                self.client.queue(bytes)
                self.returnScratchBytes(bytes)
                self.machine.responseStartedSending()
            }
        case .head:
            preconditionFailure("the proxy's response parser delivers raw heads (HTTPResponseParser.forProxy)")
        case .rawHead(let head, _) where head.status == 101:
            self.upstreamSwitchedProtocols(head, in: slice, from: connection)
        case .rawHead(let head, let info):
            // The client's head is copied from the upstream's bytes.
            self.exchange.responseStatus = head.status
            self.exchange.upstreamKeepAlive = info.isKeepAlive
            let output = self.client.outputBuffer()
            let before = output.readableCount
            (self.exchange.responseEncoding, self.exchange.responseCloseAfter) = ClientResponsePlan.writeHead(
                head, in: slice, framing: info.framing, requestMethod: self.exchange.head?.method ?? "GET",
                clientVersionMinor: self.exchange.head?.versionMinor ?? 1,
                keepAlive: self.machine.keepAliveAfterResponse, requestID: self.requestID, into: output)
            self.client.noteQueued(output.readableCount - before)
            self.machine.responseStartedSending()
        case .body(let range):
            let bytes = UnsafeRawBufferPointer(rebasing: slice[range])
            switch self.exchange.responseEncoding {
            case .chunked:
                var framing = self.takeScratchBytes()
                HTTPSerializer.writeChunk(bytes, into: &framing)
                self.client.queue(framing)
                self.returnScratchBytes(framing)
            case .identity, .none:
                self.client.queue(bytes)
            }
        case .end(let trailers):
            if self.exchange.responseEncoding == .chunked {
                var framing = self.takeScratchBytes()
                HTTPSerializer.writeLastChunk(trailers: HeaderRewriting.forwardedTrailers(trailers), into: &framing)
                self.client.queue(framing)
                self.returnScratchBytes(framing)
            }
            self.responseEnded(connection)
        case .error:
            self.upstreamBroke(connection, invalid: true)
        }
    }

    private func responseEnded(_ connection: UpstreamConnection) {
        if self.exchange.upstreamStart != 0, let name = self.exchange.classification?.upstream {
            self.recorder.upstreamResponded(
                name, nanoseconds: SystemCalls.monotonicNanoseconds() &- self.exchange.upstreamStart)
        }
        switch self.machine.responseEnded(upstreamKeepAlive: self.exchange.upstreamKeepAlive) {
        case .finish(let reusable, let keepAlive):
            // An upstream asked to upgrade and answering otherwise may still be switching: not reused.
            self.releaseUpstream(connection, reusable: reusable && self.exchange.websocketKey == nil)
            self.finishRequest(keepAlive: keepAlive && !self.exchange.responseCloseAfter)
        case .finishAndClose:
            self.releaseUpstream(connection, reusable: false)
            self.finishRequest(keepAlive: false)
        }
    }

    func upstreamBroke(_ connection: UpstreamConnection) {
        self.upstreamBroke(connection, invalid: false)
    }

    /// Reset, closed early, or an invalid response.
    private func upstreamBroke(_ connection: UpstreamConnection, invalid: Bool) {
        let wasIdle = connection.isReused
        let anyByte = connection.receivedResponseByte
        self.releaseUpstream(connection, reusable: false)
        self.handleUpstreamFailure(invalid ? .invalidResponse : .unavailable, wasIdle: wasIdle, anyByte: anyByte)
    }

    // MARK: - Failures

    /// The whole request is still held (no body streamed): it can be sent again.
    private var requestIsReplayable: Bool {
        self.exchange.requestEncoding == .none || self.machine.bufferCap != nil
    }

    func handleUpstreamFailure(
        _ failure: ProxyConnectionStateMachine.UpstreamFailure, wasIdle: Bool, anyByte: Bool
    ) {
        let action = self.machine.upstreamFailed(
            failure, anyResponseByte: anyByte, wasIdlePooledConnection: wasIdle,
            requestReplayable: self.requestIsReplayable)
        if action != .retry { self.countUpstreamError(failure) }
        switch action {
        case .retry:
            self.acquireUpstream(fresh: true)
        case .respond(let error, let keepAlive):
            self.queueLocalResponse(error.response, keepAlive: keepAlive)
            self.finishRequest(keepAlive: self.machine.localResponseWritten())
        case .abort:
            self.abort("upstream failed after the response started")
        }
    }

    func countUpstreamError(_ failure: ProxyConnectionStateMachine.UpstreamFailure) {
        let kind: String
        switch failure {
        case .unavailable: kind = "unavailable"
        case .timeout: kind = "timeout"
        case .invalidResponse: kind = "invalid_response"
        case .poolExhausted: kind = "pool_exhausted"
        case .tls: kind = "tls"
        }
        self.server.metrics.upstreamErrors.labels(self.exchange.classification?.upstream ?? "-", kind).increment()
    }
}
