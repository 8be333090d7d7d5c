import GateContract
import GatewayIO
import HTTP1
import PolicyModel

/// A stream's upstream exchange: the lease on the `UpstreamPool`, its request body forwarded
/// within the flow-control windows, the upstream's response events mapped to the stream's
/// HEADERS, DATA and trailers, and its failures.
extension HTTP2ServerConnection {
    func acquireUpstream(_ stream: HTTP2Stream, fresh: Bool) {
        guard let target = stream.exchange.target else { return }
        let pool = target.pools[self.loop.index]
        switch pool.acquire(for: stream, fresh: fresh) {
        case .ready(let connection): self.attach(connection, to: stream)
        case .connecting: break
        case .queued: stream.waitingPool = pool
        case .failed: self.upstreamFailed(.unavailable, for: stream)
        case .exhausted: self.upstreamFailed(.poolExhausted, for: stream)
        }
    }

    func attach(_ connection: UpstreamConnection, to stream: HTTP2Stream) {
        stream.upstream = connection
        stream.phase = .exchanging
        self.armUpstreamDeadline(stream, connecting: false)
        stream.exchange.upstreamStart = SystemCalls.monotonicNanoseconds()
        connection.send(request: stream.requestBytes, method: stream.exchange.head?.method ?? "GET")
        if !stream.heldBody.isEmpty {
            let held = stream.heldBody
            stream.heldBody = []
            held.withUnsafeBytes { self.forwardBody(stream, $0) }
        }
        if stream.requestEnded && stream.exchange.requestEncoding == .chunked {
            var framing: [UInt8] = []
            HTTPSerializer.writeLastChunk(trailers: nil, into: &framing)
            connection.send(framing)
        }
        self.needsRelay(stream)
        self.repump = true
    }

    func forwardBody(_ stream: HTTP2Stream, _ bytes: UnsafeRawBufferPointer) {
        guard let upstream = stream.upstream else { return }
        if stream.exchange.requestEncoding == .chunked {
            var framing: [UInt8] = []
            HTTPSerializer.writeChunk(bytes, into: &framing)
            upstream.send(framing)
        } else {
            upstream.send(bytes)
        }
        if upstream.unsentRequestBytes > ProxyConnection.highWaterMark {
            stream.owedWindow += bytes.count
        } else {
            self.session.consume(stream.id, bytes.count)
        }
        self.needsRelay(stream)
    }

    func flushUpstream(_ stream: HTTP2Stream) {
        guard let upstream = stream.upstream else { return }
        if !upstream.flushRequest() {
            self.upstreamBroke(upstream, invalid: false, for: stream)
            return
        }
        if stream.owedWindow > 0 && upstream.unsentRequestBytes <= ProxyConnection.highWaterMark {
            self.session.consume(stream.id, stream.owedWindow)
            stream.owedWindow = 0
            self.repump = true
        }
    }

    func upstreamReady(_ connection: UpstreamConnection, for stream: HTTP2Stream) {
        guard !self.isClosed, stream.phase == .connecting, self.streams.contains(stream) else {
            connection.pool.release(connection, reusable: true)
            return
        }
        stream.waitingPool = nil
        self.attach(connection, to: stream)
        self.pump()
    }

    func upstreamFailed(_ failure: ProxyConnectionStateMachine.UpstreamFailure, for stream: HTTP2Stream) {
        guard !self.isClosed, self.streams.contains(stream) else { return }
        stream.waitingPool = nil
        self.countUpstreamError(failure, stream)
        self.respondLocally(stream, Self.upstreamError(failure).response)
        self.pump()
    }

    func upstreamBroke(_ connection: UpstreamConnection, invalid: Bool, for stream: HTTP2Stream) {
        let wasIdle = connection.isReused
        let anyByte = connection.receivedResponseByte
        if stream.upstream === connection { stream.upstream = nil }
        connection.pool.release(connection, reusable: false)
        guard self.streams.contains(stream) else { return }
        // A pooled connection that died idle, before any response byte: send the whole request again once.
        let replayable =
            stream.exchange.requestEncoding == .none || stream.exchange.classification?.bufferBodyUpTo != nil
        if !invalid && wasIdle && !anyByte && replayable && !stream.retried && stream.phase == .exchanging {
            stream.retried = true
            stream.phase = .connecting
            self.armUpstreamDeadline(stream, connecting: true)
            self.acquireUpstream(stream, fresh: true)
            return
        }
        let failure: ProxyConnectionStateMachine.UpstreamFailure = invalid ? .invalidResponse : .unavailable
        self.countUpstreamError(failure, stream)
        if stream.phase == .responded {
            // The response started: the client learns of the break from a reset.
            self.session.reset(stream.id, .internalError)
        } else {
            self.respondLocally(stream, Self.upstreamError(failure).response)
        }
        self.repump = true
    }

    func upstreamResponse(
        _ event: HTTPResponseEvent, in slice: UnsafeRawBufferPointer, from connection: UpstreamConnection,
        for stream: HTTP2Stream
    ) {
        self.armUpstreamDeadline(stream, connecting: false)
        switch event {
        case .informational:
            break  // 1xx are not relayed over HTTP/2 (the gateway answers Expect itself).
        case .head:
            preconditionFailure("the proxy's response parser delivers raw heads")
        case .rawHead(let raw, let info):
            // The fields go from the upstream's bytes to nghttp2's pairs without `String`s: what
            // `HeaderRewriting.clientResponse` drops (hop-by-hop fields, those Connection names)
            // is dropped, and X-Request-ID is the gateway's.
            stream.exchange.responseStatus = raw.status
            stream.upstreamKeepAlive = info.isKeepAlive
            let options =
                raw.connectionNamesFields
                ? HeaderRewriting.ConnectionOptions(raw.fields, in: slice) : HeaderRewriting.ConnectionOptions()
            let hasBody = !stream.headRequest && info.framing != .none
            stream.phase = .responded
            stream.responseComplete = !hasBody
            self.session.respond(
                stream.id, status: raw.status, fields: raw.fields, in: slice,
                keep: { field in
                    !HeaderRewriting.isHopByHop(slice, field.name) && !options.names(slice, field.name)
                        && !slice.equalsLowercaseToken(field.name, "x-request-id")
                },
                extra: stream.exchange.correlation.map { (name: "x-request-id", value: $0.requestID.text) },
                hasBody: hasBody)
        case .body(let range):
            // Typed: an `UnsafeRawBufferPointer` append instantiates generic metadata per call.
            stream.responseBody.append(
                contentsOf: UnsafeRawBufferPointer(rebasing: slice[range]).assumingMemoryBound(to: UInt8.self))
            self.session.resume(stream.id)
        case .end(let trailers):
            if let trailers = HeaderRewriting.forwardedTrailers(trailers) {
                stream.responseTrailers = trailers.fields.map { ($0.name.lowercased(), $0.value) }
            }
            stream.responseComplete = true
            stream.upstreamDeadline = 0
            if let name = stream.exchange.classification?.upstream, stream.exchange.upstreamStart != 0 {
                self.recorder.upstreamResponded(
                    name, nanoseconds: SystemCalls.monotonicNanoseconds() &- stream.exchange.upstreamStart)
            }
            stream.upstream = nil
            connection.pool.release(connection, reusable: stream.upstreamKeepAlive && self.upstreamIsClean(stream))
            self.session.resume(stream.id)
        case .error:
            self.upstreamBroke(connection, invalid: true, for: stream)
        }
    }

    /// The upstream connection carried the whole request: it may serve another.
    func upstreamIsClean(_ stream: HTTP2Stream) -> Bool {
        stream.requestEnded && stream.heldBody.isEmpty
    }

    static func upstreamError(_ failure: ProxyConnectionStateMachine.UpstreamFailure) -> ProxyError {
        switch failure {
        case .unavailable: .upstreamUnavailable
        case .timeout: .upstreamTimeout
        case .invalidResponse: .upstreamInvalidResponse
        case .poolExhausted: .upstreamBusy
        case .tls(let tls): tls.error
        }
    }

    func countUpstreamError(_ failure: ProxyConnectionStateMachine.UpstreamFailure, _ stream: HTTP2Stream) {
        let kind: String
        switch failure {
        case .unavailable: kind = "unavailable"
        case .timeout: kind = "timeout"
        case .invalidResponse: kind = "invalid_response"
        case .poolExhausted: kind = "pool_exhausted"
        case .tls: kind = "tls"
        }
        self.owner.server.metrics.upstreamErrors.labels(stream.exchange.classification?.upstream ?? "-", kind)
            .increment()
    }
}
