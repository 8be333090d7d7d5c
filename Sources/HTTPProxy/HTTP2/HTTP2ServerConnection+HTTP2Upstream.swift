import GateContract
import GatewayIO
import HTTP1

/// A stream's exchange with a `protocol: h2`/`h2c` upstream: one stream on an
/// `HTTP2UpstreamPool` connection instead of an HTTP/1.1 lease.
///
/// The header block is made from the HTTP/1.1 head `UpstreamRequestPlan` writes
/// (`HTTP2UpstreamHead`), so the identity headers and every strip or rewrite are those of an
/// HTTP/1.1 upstream. Flow control end to end: a request body byte is acknowledged to the
/// client (WINDOW_UPDATE) only once the upstream session took it, and a response byte to the
/// upstream only once the client's session took it; the upstream connection's own window is
/// given back at once, so one slow client stream holds only its own upstream stream.
extension HTTP2ServerConnection {
    /// After the gate's `.forward`: the upstream stream is asked for.
    func forwardToHTTP2Upstream(_ stream: HTTP2Stream, _ head: HTTPRequestHead, target: UpstreamTarget) {
        let pool = target.http2Pools[self.loop.index]
        self.writeUpstreamHead(stream, head, target: target)
        let keepsTE = head.headers.contains { $0.name.lowercased() == "te" && $0.value.lowercased() == "trailers" }
        let fields = stream.requestBytes.withUnsafeBytes {
            HTTP2UpstreamHead.fields(fromHTTP1Head: $0, scheme: pool.scheme, keepsTETrailers: keepsTE)
        }
        stream.requestBytes = []
        if stream.mapped?.isGRPC == true,
            let timeout = head.headers.first(where: { $0.name.lowercased() == "grpc-timeout" }).flatMap({
                GRPCTimeout.nanoseconds($0.value)
            })
        {
            stream.grpcDeadline = max(self.loop.now &+ timeout, 1)
        }
        guard let fields else {
            self.upstreamFailed(.unavailable, for: stream)
            return
        }
        if let body = stream.exchange.bufferedBody {
            stream.upstreamBody = body
            stream.upstreamBodyAcknowledged = body.count
            stream.exchange.bufferedBody = nil
        }
        stream.upstreamBody.append(contentsOf: stream.heldBody)
        stream.heldBody = []
        stream.http2Request = (fields, !(stream.requestEnded && stream.upstreamBody.isEmpty))
        stream.phase = .connecting
        self.armUpstreamDeadline(stream, connecting: true)
        self.requestHTTP2Stream(stream, pool: pool)
    }

    private func requestHTTP2Stream(_ stream: HTTP2Stream, pool: HTTP2UpstreamPool) {
        guard let request = stream.http2Request else { return }
        switch pool.request(request.fields, hasBody: request.hasBody, owner: stream) {
        case .started: break
        case .queued: stream.http2WaitingPool = pool
        case .failed: self.upstreamFailed(.unavailable, for: stream)
        case .exhausted: self.upstreamFailed(.poolExhausted, for: stream)
        }
    }

    /// Request body bytes for a stream bound to an HTTP/2 upstream: kept until its session
    /// takes them (unacknowledged, so the client's window bounds them).
    func forwardBodyToHTTP2Upstream(_ stream: HTTP2Stream, _ bytes: UnsafeRawBufferPointer) {
        stream.upstreamBody.append(contentsOf: bytes)
        if let upstream = stream.http2Upstream { upstream.resumeBody(stream.http2UpstreamStreamID) }
    }

    /// The client's body ended: the upstream session sends END_STREAM once it took the rest.
    func http2UpstreamRequestEnded(_ stream: HTTP2Stream) {
        if let upstream = stream.http2Upstream { upstream.resumeBody(stream.http2UpstreamStreamID) }
    }

    /// Lets go of the stream's upstream stream or its place in the queue (the stream was
    /// answered, reset or closed): RST_STREAM CANCEL upstream when it is still open.
    func releaseHTTP2Upstream(_ stream: HTTP2Stream) {
        if let pool = stream.http2WaitingPool {
            pool.cancelWait(stream)
            stream.http2WaitingPool = nil
        }
        if let upstream = stream.http2Upstream {
            stream.http2Upstream = nil
            upstream.cancel(stream.http2UpstreamStreamID)
        }
    }

    // MARK: - From the upstream connection (HTTP2Stream's HTTP2UpstreamStreamOwner)

    func http2UpstreamOpened(_ upstream: HTTP2UpstreamConnection, streamID: Int32, for stream: HTTP2Stream) {
        stream.http2WaitingPool = nil
        guard !self.isClosed, stream.phase == .connecting, self.streams.contains(stream) else {
            upstream.cancel(streamID)
            return
        }
        stream.http2Upstream = upstream
        stream.http2UpstreamStreamID = streamID
        stream.phase = .exchanging
        self.armUpstreamDeadline(stream, connecting: false)
        stream.exchange.upstreamStart = SystemCalls.monotonicNanoseconds()
    }

    func http2UpstreamHead(status: Int, fields: [(String, String)], endStream: Bool, for stream: HTTP2Stream) {
        guard self.isLive(stream) else { return }
        self.armUpstreamDeadline(stream, connecting: false)
        var head = HTTPResponseHead(status: status, headers: HTTPHeaders(fields))
        head = HeaderRewriting.clientResponse(head)
        var out: [(String, String)] = []
        out.reserveCapacity(fields.count + 1)
        for field in head.headers {
            let name = field.name.lowercased()
            if name == "x-request-id" || HTTP2RequestMapping.isConnectionSpecific(name) {
                continue
            }
            out.append((name, field.value))
        }
        if let requestID = stream.exchange.correlation?.requestID { out.append(("x-request-id", requestID.text)) }
        stream.exchange.responseStatus = status
        stream.phase = .responded
        stream.responseComplete = endStream
        let hasBody = !endStream && !stream.headRequest
        self.session.respond(stream.id, status: status, headers: out, hasBody: hasBody)
        self.schedulePump()
    }

    func http2UpstreamData(_ bytes: UnsafeRawBufferPointer, for stream: HTTP2Stream) {
        guard self.isLive(stream), let upstream = stream.http2Upstream else { return }
        self.armUpstreamDeadline(stream, connecting: false)
        if stream.headRequest {
            upstream.consume(stream.http2UpstreamStreamID, bytes.count)
            return
        }
        stream.responseBody.append(contentsOf: bytes)
        self.session.resume(stream.id)
        self.schedulePump()
    }

    func http2UpstreamEnded(trailers: [(String, String)], for stream: HTTP2Stream) {
        guard self.isLive(stream) else { return }
        if let forwarded = HeaderRewriting.forwardedTrailers(HTTPHeaders(trailers)) {
            stream.responseTrailers = forwarded.map { ($0.name.lowercased(), $0.value) }
        }
        stream.responseComplete = true
        stream.upstreamDeadline = 0
        if let name = stream.exchange.classification?.upstream, stream.exchange.upstreamStart != 0 {
            self.recorder.upstreamResponded(
                name, nanoseconds: SystemCalls.monotonicNanoseconds() &- stream.exchange.upstreamStart)
        }
        if let upstream = stream.http2Upstream, !stream.requestEnded {
            // Answered before the request body ended: the upstream stream is not needed further.
            upstream.cancel(stream.http2UpstreamStreamID)
        }
        stream.http2Upstream = nil
        if stream.phase != .responded {
            // A head with END_STREAM came first; nothing else to do.
            stream.phase = .responded
        }
        self.session.resume(stream.id)
        self.schedulePump()
    }

    /// The upstream stream ended without a complete response. A request the upstream did not
    /// process, with none of its body sent, goes again once (on another connection: this one is
    /// going away or refused it); otherwise 502 (gRPC 14), or a reset once the response started.
    func http2UpstreamBroke(unprocessed: Bool, for stream: HTTP2Stream) {
        stream.http2Upstream = nil
        guard self.isLive(stream) else { return }
        let replayable = !stream.upstreamBodySent
        if unprocessed && replayable && !stream.retried && stream.phase == .exchanging,
            let name = stream.exchange.classification?.upstream, let target = self.owner.upstreamTarget(name),
            !target.http2Pools.isEmpty
        {
            stream.retried = true
            target.http2Pools[self.loop.index].countRetry()
            stream.upstreamBodyOffset = 0
            stream.phase = .connecting
            self.armUpstreamDeadline(stream, connecting: true)
            self.requestHTTP2Stream(stream, pool: target.http2Pools[self.loop.index])
            self.schedulePump()
            return
        }
        self.countUpstreamError(.unavailable, stream)
        if stream.phase == .responded {
            self.session.reset(stream.id, .internalError)
        } else {
            self.respondLocally(stream, ProxyError.upstreamUnavailable.response)
        }
        self.schedulePump()
    }

    func http2UpstreamRequestBody(
        into buffer: UnsafeMutableRawBufferPointer, for stream: HTTP2Stream
    ) -> (count: Int, last: Bool)? {
        guard self.isLive(stream) else { return (0, true) }
        let pending = stream.upstreamBody.count - stream.upstreamBodyOffset
        let count = min(buffer.count, pending)
        if count > 0 {
            stream.upstreamBody.withUnsafeBytes { source in
                buffer.copyMemory(
                    from: UnsafeRawBufferPointer(
                        rebasing: source[stream.upstreamBodyOffset..<stream.upstreamBodyOffset + count]))
            }
            stream.upstreamBodyOffset += count
            stream.upstreamBodySent = true
            let alreadyAcknowledged = min(count, stream.upstreamBodyAcknowledged)
            stream.upstreamBodyAcknowledged -= alreadyAcknowledged
            if count > alreadyAcknowledged {
                self.session.consume(stream.id, count - alreadyAcknowledged)
                self.schedulePump()
            }
            if stream.upstreamBodyOffset == stream.upstreamBody.count {
                stream.upstreamBody.removeAll(keepingCapacity: stream.upstreamBody.capacity <= 64 * 1024)
                stream.upstreamBodyOffset = 0
            }
        }
        let last = stream.requestEnded && stream.upstreamBodyOffset == stream.upstreamBody.count
        if count == 0 && !last { return nil }
        return (count, last)
    }

    /// The stream is still this connection's and open.
    private func isLive(_ stream: HTTP2Stream) -> Bool {
        !self.isClosed && self.streams.contains(stream)
    }
}
