import GatewayIO
import Glibc
import HTTP1

/// HTTP/1.1 clients to a `protocol: h2`/`h2c` upstream: each connection of the upstream's
/// HTTP/1.1 pool is one end of a local socket pair whose other end this object serves. It reads
/// the HTTP/1.1 requests the proxy writes there (`UpstreamRequestPlan`'s heads, bodies with their
/// framing), sends each as one stream on the loop's `HTTP2UpstreamPool`, and writes the stream's
/// response back as HTTP/1.1 (`Content-Length` kept when the upstream sent one, else chunked,
/// with the trailers in the last chunk).
///
/// So the HTTP/1.1 connection's whole upstream path (leases, keep-alive, request and response
/// framing, timeouts, `ClientResponsePlan`, the client's `TE`) is the one it has with any
/// HTTP/1.1 upstream; only the pool's transport differs (`UpstreamTarget` gives the pools of an
/// HTTP/2 upstream a factory that makes these). Back-pressure both ways through the socket
/// pair's buffers: the request body is read from it only while the upstream session took what
/// was read (at most `highWaterMark` held), and a response byte is acknowledged to the upstream
/// (its stream window, `consume`) only once the socket took it.
///
/// A gRPC request (`content-type: application/grpc*`) is not sent: gRPC needs HTTP/2 end to
/// end, so an HTTP/1.1 client's one gets 502 `upstream_unavailable`, as before.
///
/// A stream the upstream did not process (GOAWAY above it, REFUSED_STREAM) goes again once,
/// when its body is still whole here (the first 64 KiB sent are kept until the response starts). Any other failure closes the socket pair before or in the response:
/// the proxy answers 502 `upstream_unavailable` (or cuts the response), as for an HTTP/1.1
/// upstream that closed.
///
/// Confined to the pool's loop; `@unchecked Sendable` for the deferred passes.
final class HTTP1ToHTTP2UpstreamExchange: EventHandler, HTTP2UpstreamStreamOwner, @unchecked Sendable {
    /// Request body bytes held for the upstream session at most before the socket is not read.
    static let highWaterMark = 64 * 1024

    let pool: HTTP2UpstreamPool
    private let channel: SocketChannel
    private var parser: HTTPRequestParser
    /// Read and not parsed yet.
    private var input: [UInt8] = []

    // The exchange in progress (one at a time: the proxy does not pipeline upstream).
    private var active = false
    private var fields: [(String, String)] = []
    private var hasBody = false
    private var headRequest = false
    private var requestEnded = false
    /// Request body bytes read, not yet taken by the upstream session (from `bodyOffset` on).
    private var body: [UInt8] = []
    private var bodyOffset = 0
    /// Body bytes the upstream session took were let go (beyond `highWaterMark`): no retry.
    private var bodyDropped = false
    private var retried = false
    private var upstream: HTTP2UpstreamConnection?
    private var streamID: Int32 = 0
    private var waiting = false
    private var responseStarted = false
    private var responseEnded = false
    /// How the response body is written: chunked, identity (a `content-length`), or none.
    private var responseChunked = false
    private var responseHasBody = false
    /// Response bytes written to the socket but not acknowledged to the upstream yet.
    private var owed = 0
    private var pumpScheduled = false
    private var closed = false

    private init(pool: HTTP2UpstreamPool, fd: Int32) {
        self.pool = pool
        self.channel = SocketChannel(transport: PlainTransport(fd: fd), loop: pool.loop)
        var limits = HTTPParserLimits()
        // The proxy's own heads and bodies: their limits were applied to the client's request.
        limits.maxHeaderBytes = 1 << 20
        limits.maxHeaderCount = 10_000
        limits.maxBodyBytes = .max
        limits.dropsUnderscoreFieldNames = false
        self.parser = HTTPRequestParser(limits: limits)
    }

    /// A socket pair: this exchange serves one end; the other is the HTTP/1.1 pool's transport.
    static func open(pool: HTTP2UpstreamPool) throws(IOError) -> any ByteTransport {
        var fds: [Int32] = [-1, -1]
        let kind = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, kind, 0, &fds) == 0 else { throw IOError("socketpair", errno: errno) }
        let exchange = HTTP1ToHTTP2UpstreamExchange(pool: pool, fd: fds[1])
        do {
            try exchange.channel.register(handler: exchange)
        } catch {
            _ = Glibc.close(fds[0])
            exchange.channel.close()
            throw error
        }
        return PlainTransport(fd: fds[0])
    }

    // MARK: - Socket events

    func handleEvents(_ events: UInt32) {
        self.channel.noteEvents(events)
        if events & EventLoop.error != 0 {
            self.teardown()
            return
        }
        self.pump()
    }

    func handleDeadline() {}

    private func schedulePump() {
        guard !self.pumpScheduled, !self.closed else { return }
        self.pumpScheduled = true
        self.pool.loop.execute { [self] in
            self.pumpScheduled = false
            self.pump()
        }
    }

    private func pump() {
        guard !self.closed else { return }
        self.read()
        self.flush()
    }

    /// Reads requests while the body held for the upstream is below the high-water mark.
    private func read() {
        while !self.closed && self.channel.mayRead && self.body.count - self.bodyOffset < Self.highWaterMark {
            let outcome: SocketChannel.ReadOutcome
            do {
                outcome = try self.channel.readOnce()
            } catch {
                self.teardown()
                return
            }
            switch outcome {
            case .wouldBlock:
                return
            case .endOfFile:
                self.teardown()
                return
            case .scratch(let bytes):
                self.input.append(contentsOf: bytes)
            case .appended:
                guard let buffer = self.channel.input else { continue }
                self.channel.input = nil
                self.input.append(contentsOf: buffer.readableBytes)
                buffer.consume(buffer.readableCount)
                self.pool.loop.buffers.give(buffer)
            }
            self.parse()
        }
        self.parse()
    }

    private func parse() {
        while !self.closed && !(self.active && self.requestEnded) {
            let (event, consumed) = self.input.withUnsafeBytes { self.parser.next($0) }
            guard let event else { return }
            switch event {
            case .head(let head, let info):
                // This parser's limits are wider than any the plan's head was written within, so
                // its head is the plan's as written: no second parse of the same bytes.
                let fields = HTTP2UpstreamHead.fields(head, scheme: self.pool.scheme, keepsTETrailers: false)
                self.begin(fields, headRequest: head.method == "HEAD", framing: info.framing)
            case .body(let range):
                // After an early answer the rest of the body is dropped.
                if !self.responseEnded {
                    self.body.append(contentsOf: self.input[range])
                    self.upstream?.resumeBody(self.streamID)
                }
            case .end:
                // Request trailers are not sent upstream (as from HTTP/2 clients).
                self.requestEnded = true
                self.upstream?.resumeBody(self.streamID)
                if self.responseEnded { self.finish() }
            case .error:
                self.teardown()
                return
            }
            self.input.removeFirst(consumed)
        }
    }

    private func begin(_ fields: [(String, String)], headRequest: Bool, framing: RequestBodyFraming) {
        // gRPC is HTTP/2's alone: a gRPC request from an HTTP/1.1 client stays refused (502).
        if fields.contains(where: { $0.0 == "content-type" && $0.1.lowercased().hasPrefix("application/grpc") }) {
            self.teardown()
            return
        }
        self.active = true
        self.fields = fields
        self.headRequest = headRequest
        switch framing {
        case .none, .contentLength(0): self.hasBody = false
        case .contentLength, .chunked: self.hasBody = true
        }
        self.requestEnded = false
        self.retried = false
        self.bodyDropped = false
        self.request()
    }

    private func request() {
        switch self.pool.request(self.fields, hasBody: self.hasBody, owner: self) {
        case .started: break
        case .queued: self.waiting = true
        case .failed, .exhausted: self.teardown()
        }
    }

    /// The response and the request both ended: ready for the next request on this connection.
    private func finish() {
        self.active = false
        self.fields = []
        self.upstream = nil
        self.streamID = 0
        self.body = []
        self.bodyOffset = 0
        self.responseStarted = false
        self.responseEnded = false
        self.responseChunked = false
        self.responseHasBody = false
        self.requestEnded = false
        self.schedulePump()
    }

    // MARK: - Writing the response

    private func write(_ bytes: [UInt8]) {
        self.channel.queue(bytes)
    }

    private func flush() {
        guard !self.closed else { return }
        do {
            try self.channel.flush()
        } catch {
            self.teardown()
            return
        }
        if self.owed > 0 && self.channel.unsentCount <= Self.highWaterMark {
            let owed = self.owed
            self.owed = 0
            self.upstream?.consume(self.streamID, owed)
        }
    }

    /// Closes the socket pair (the proxy sees its upstream close) and lets go of the stream.
    private func teardown() {
        guard !self.closed else { return }
        self.closed = true
        if self.waiting { self.pool.cancelWait(self) }
        if let upstream = self.upstream {
            self.upstream = nil
            upstream.cancel(self.streamID)
        }
        self.channel.close()
    }

    // MARK: - HTTP2UpstreamStreamOwner

    func upstreamStreamOpened(_ connection: HTTP2UpstreamConnection, streamID: Int32) {
        self.waiting = false
        guard !self.closed, self.active else {
            connection.cancel(streamID)
            return
        }
        self.upstream = connection
        self.streamID = streamID
    }

    func upstreamStreamFailed(_ failure: ProxyConnectionStateMachine.UpstreamFailure) {
        self.waiting = false
        self.teardown()
    }

    func upstreamResponseHead(status: Int, fields: [(String, String)], endStream: Bool) {
        guard !self.closed, self.active else { return }
        self.responseStarted = true
        var headers: [(String, String)] = []
        headers.reserveCapacity(fields.count + 1)
        var contentLength: String?
        for (name, value) in fields {
            if name == "content-length" {
                contentLength = value
            } else if !HTTP2UpstreamHead.droppedNames.contains(name) {
                headers.append((name, value))
            }
        }
        let bodyless = self.headRequest || status == 204 || status == 304
        if bodyless {
            if let contentLength { headers.append(("content-length", contentLength)) }
        } else if endStream {
            headers.append(("content-length", "0"))
        } else if let contentLength {
            headers.append(("content-length", contentLength))
            self.responseHasBody = true
        } else {
            headers.append(("transfer-encoding", "chunked"))
            self.responseHasBody = true
            self.responseChunked = true
        }
        var bytes: [UInt8] = []
        HTTPSerializer.writeResponseHead(HTTPResponseHead(status: status, headers: HTTPHeaders(headers)), into: &bytes)
        self.write(bytes)
        self.flush()
    }

    func upstreamResponseData(_ bytes: UnsafeRawBufferPointer) {
        guard !self.closed, self.active, self.responseHasBody else {
            self.upstream?.consume(self.streamID, bytes.count)
            return
        }
        if self.responseChunked {
            var framed: [UInt8] = []
            HTTPSerializer.writeChunk(bytes, into: &framed)
            self.write(framed)
        } else {
            self.channel.queue(bytes)
        }
        self.owed += bytes.count
        self.flush()
    }

    func upstreamResponseEnded(trailers: [(String, String)]) {
        guard !self.closed, self.active else { return }
        if self.responseChunked {
            var last: [UInt8] = []
            HTTPSerializer.writeLastChunk(trailers: trailers.isEmpty ? nil : HTTPHeaders(trailers), into: &last)
            self.write(last)
        }
        self.responseEnded = true
        self.flush()
        if let upstream = self.upstream, !self.requestEnded {
            // Answered before the request body ended: the upstream stream is not needed further;
            // the rest of the body is read and dropped.
            upstream.cancel(self.streamID)
        }
        self.upstream = nil
        if self.requestEnded { self.finish() } else { self.schedulePump() }
    }

    func upstreamStreamBroke(unprocessed: Bool) {
        self.upstream = nil
        guard !self.closed, self.active else { return }
        if unprocessed && !self.bodyDropped && !self.retried && !self.responseStarted {
            self.retried = true
            self.pool.countRetry()
            self.bodyOffset = 0
            self.request()
            return
        }
        self.teardown()
    }

    func upstreamRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, last: Bool)? {
        guard !self.closed, self.active else { return (0, true) }
        let pending = self.body.count - self.bodyOffset
        let count = min(buffer.count, pending)
        if count > 0 {
            self.body.withUnsafeBytes { source in
                buffer.copyMemory(
                    from: UnsafeRawBufferPointer(rebasing: source[self.bodyOffset..<self.bodyOffset + count]))
            }
            self.bodyOffset += count
            // The first `highWaterMark` bytes are kept until the response starts, so that a
            // stream the upstream did not process can be sent again whole; beyond, they go.
            if self.bodyOffset > Self.highWaterMark {
                self.body.removeFirst(self.bodyOffset)
                self.bodyOffset = 0
                self.bodyDropped = true
            }
            // Room again: more of the request may be read (on the loop's next turn, not inside
            // the upstream session's callback).
            self.schedulePump()
        }
        let last = self.requestEnded && self.bodyOffset == self.body.count
        if count == 0 && !last { return nil }
        return (count, last)
    }
}
