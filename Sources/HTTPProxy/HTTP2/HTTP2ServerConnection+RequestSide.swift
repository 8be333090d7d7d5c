import GateContract
import GatewayIO
import HTTP1
import PolicyModel

/// The request side of the session's callbacks: stream bookkeeping (a stream opens, its header
/// block is collected and mapped, its DATA goes where its phase says, it closes) and the
/// frames the flood guard counts.
extension HTTP2ServerConnection {
    func http2StreamOpened(_ streamID: Int32) {
        guard !self.goingAway else {
            self.session.reset(streamID, .refusedStream)
            return
        }
        self.metrics.streams.increment()
        self.owner.refreshSnapshot()
        let exchange = RequestExchange(clientLimitKey: self.owner.peerLimitKey, clientAddress: self.owner.peerAddress)
        let stream = HTTP2Stream(
            id: streamID, connection: self, exchange: exchange, client: self.owner.forwardedClient)
        stream.exchange.requestStart = SystemCalls.monotonicNanoseconds()
        self.streams[streamID] = stream
    }

    func http2Field(_ streamID: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool {
        guard let stream = self.streams[streamID] else { return true }
        guard stream.phase == .head else { return true }  // request trailers: not forwarded
        stream.fieldBytes += name.count + value.count + 32
        // Kept up to one field past the mapping's limits, so that the mapping refuses the block
        // with its code; the rest is not held (an HPACK bomb decodes into nothing kept).
        if stream.fieldsOverflowed { return true }
        if stream.fields.count > self.mappingLimits.maxFieldCount
            || stream.fieldBytes > self.mappingLimits.maxHeaderListBytes + name.count + value.count + 32
        {
            stream.fieldsOverflowed = true
            return true
        }
        stream.fields.append(HTTP2HeaderField(name: Array(name), value: Array(value)))
        return true
    }

    func http2HeadersEnded(_ streamID: Int32, endStream: Bool) {
        guard let stream = self.streams[streamID], stream.phase == .head else { return }
        stream.requestEnded = endStream
        let fields = stream.fields
        stream.fields = []
        switch HTTP2RequestMapping.map(fields, limits: self.mappingLimits) {
        case .failure(let error):
            stream.isGRPCGuess = fields.contains {
                $0.name == Array("content-type".utf8) && $0.value.starts(with: Array("application/grpc".utf8))
            }
            stream.phase = .responded
            self.answerLocally(
                stream,
                .jsonError(
                    status: error.status, code: error.code.rawValue,
                    message: "the request is not valid HTTP/2 (\(error.code.rawValue))"),
                verdict: .malformed)
        case .success(let mapped):
            self.requestReceived(stream, mapped)
        }
    }

    func http2TrailersEnded(_ streamID: Int32) {
        self.http2DataEnded(streamID)
    }

    func http2Data(_ streamID: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let stream = self.streams[streamID] else {
            self.session.consume(streamID, bytes.count)
            return
        }
        stream.bodyBytesReceived &+= UInt64(bytes.count)
        stream.exchange.bodyBytesIn &+= UInt64(bytes.count)
        if let declared = stream.mapped?.contentLength, stream.bodyBytesReceived > declared {
            self.contentLengthMismatch(stream)
            self.session.consume(streamID, bytes.count)
            return
        }
        switch stream.phase {
        case .head, .responded:
            self.session.consume(streamID, bytes.count)
        case .bufferingBody:
            let total = (stream.exchange.bufferedBody?.count ?? 0) + bytes.count
            if let cap = stream.exchange.classification?.bufferBodyUpTo, total > cap {
                self.refuse(stream, ProxyError.bodyTooLarge(cap: cap).response, verdict: .rejected)
                self.session.consume(streamID, bytes.count)
                return
            }
            guard self.reserve(stream, total) else {
                self.session.consume(streamID, bytes.count)
                return
            }
            stream.exchange.bufferedBody?.append(contentsOf: bytes)
            self.session.consume(streamID, bytes.count)
        case .connecting where stream.http2Request != nil, .exchanging where stream.http2Request != nil:
            self.forwardBodyToHTTP2Upstream(stream, bytes)
        case .deciding, .connecting:
            stream.heldBody.append(contentsOf: bytes)
        case .exchanging:
            self.forwardBody(stream, bytes)
        }
    }

    func http2DataEnded(_ streamID: Int32) {
        guard let stream = self.streams[streamID], !stream.requestEnded else { return }
        stream.requestEnded = true
        if let declared = stream.mapped?.contentLength, stream.bodyBytesReceived != declared,
            stream.phase != .responded
        {
            self.contentLengthMismatch(stream)
            return
        }
        switch stream.phase {
        case .bufferingBody:
            self.callDecide(stream, body: stream.exchange.bufferedBody ?? [])
        case .connecting where stream.http2Request != nil, .exchanging where stream.http2Request != nil:
            self.http2UpstreamRequestEnded(stream)
        case .exchanging:
            if stream.exchange.requestEncoding == .chunked, let upstream = stream.upstream {
                var framing: [UInt8] = []
                HTTPSerializer.writeLastChunk(trailers: nil, into: &framing)
                upstream.send(framing)
            }
        case .head, .deciding, .connecting, .responded:
            break
        }
    }

    func http2StreamClosed(_ streamID: Int32, errorCode: UInt32) {
        guard let stream = self.streams.removeValue(forKey: streamID) else { return }
        stream.promise = nil
        if let upstream = stream.upstream {
            stream.upstream = nil
            // Still attached: its response was not read to the end, so it carries no other request.
            upstream.pool.release(upstream, reusable: false)
        }
        if let pool = stream.waitingPool {
            pool.cancelWait(stream)
            stream.waitingPool = nil
        }
        self.releaseHTTP2Upstream(stream)
        self.record(stream)
        self.repump = true
    }

    func http2FrameReceived(_ kind: HTTP2FrameKind, streamID: Int32, flags: UInt8, length: Int) -> Bool {
        if kind == .rstStream { self.metrics.resetsReceived.increment() }
        let isAck = flags & 0x1 != 0 && (kind == .ping || kind == .settings)
        guard let flood = self.floodGuard.received(kind, isAck: isAck, length: length, at: self.loop.now) else {
            return true
        }
        guard !self.goingAway else { return false }
        self.goingAway = true
        self.metrics.goawaySent(reason: flood.rawValue)
        self.session.goAway(.enhanceYourCalm)
        if let suppressed = Self.floodLog.admit() {
            Log.info(
                "http2_flood",
                [("client", self.owner.peerAddress), ("flood", flood.rawValue), ("suppressed", String(suppressed))])
        }
        return false
    }

    func http2FrameSent(_ kind: HTTP2FrameKind, streamID: Int32, flags: UInt8, errorCode: UInt32) {
        if kind == .rstStream { self.metrics.resetsSent.increment() }
        // The whole response is out while the client is still sending its request (a refusal
        // before the body ended, an upstream that answered early): RST_STREAM NO_ERROR tells it
        // to stop (RFC 9113 §8.1), and the stream does not stay open to hold a drain.
        if kind == .data || kind == .headers, flags & 0x1 != 0, let stream = self.streams[streamID],
            !stream.requestEnded
        {
            self.session.reset(streamID, .noError)
        }
    }
}
