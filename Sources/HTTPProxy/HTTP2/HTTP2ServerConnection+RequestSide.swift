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
            self.headerBlock.reset(streamID: 0)
            return
        }
        self.metrics.streams.increment()
        self.owner.refreshSnapshot()
        let exchange = RequestExchange(clientLimitKey: self.owner.peerLimitKey, clientAddress: self.owner.peerAddress)
        let stream = HTTP2Stream(
            id: streamID, connection: self, exchange: exchange, client: self.owner.forwardedClient)
        stream.exchange.requestStart = SystemCalls.monotonicNanoseconds()
        guard self.adopt(stream) else {
            // Never: nghttp2 opens the stream before it reports its header block.
            self.session.reset(streamID, .internalError)
            self.headerBlock.reset(streamID: 0)
            return
        }
        self.headerBlock.reset(streamID: streamID)
    }

    func http2Field(_ streamID: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool {
        // Only a request head's block is collected (the one `http2StreamOpened` began); request
        // trailers and the blocks of refused streams are not forwarded. No stream lookup per field.
        guard self.headerBlock.streamID == streamID else { return true }
        self.headerBlock.receivedBytes += name.count + value.count + 32
        // Kept up to one field past the mapping's limits, so that the mapping refuses the block
        // with its code; the rest is not held (an HPACK bomb decodes into nothing kept).
        if self.headerBlock.overflowed { return true }
        if self.headerBlock.count > self.mappingLimits.maxFieldCount
            || self.headerBlock.receivedBytes > self.mappingLimits.maxHeaderListBytes + name.count + value.count + 32
        {
            self.headerBlock.overflowed = true
            return true
        }
        self.headerBlock.append(name: name, value: value)
        return true
    }

    func http2HeadersEnded(_ streamID: Int32, endStream: Bool) {
        guard let stream = self.stream(streamID), stream.phase == .head else { return }
        stream.requestEnded = endStream
        // A block that is not this stream's (never, as HTTP/2 does not interleave blocks) maps as empty.
        if self.headerBlock.streamID != streamID { self.headerBlock.reset(streamID: streamID) }
        let result = HTTP2RequestMapping.map(self.headerBlock, limits: self.mappingLimits)
        var looksLikeGRPC = false
        if case .failure = result { looksLikeGRPC = self.headerBlock.looksLikeGRPC }
        self.headerBlock.reset(streamID: 0)
        switch result {
        case .failure(let error):
            stream.isGRPCGuess = looksLikeGRPC
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
        guard let stream = self.stream(streamID) else {
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
        guard let stream = self.stream(streamID), !stream.requestEnded else { return }
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
                self.needsRelay(stream)
            }
        case .head, .deciding, .connecting, .responded:
            break
        }
    }

    func http2StreamClosed(_ streamID: Int32, errorCode: UInt32) {
        if self.headerBlock.streamID == streamID { self.headerBlock.reset(streamID: 0) }
        guard let stream = self.stream(streamID) else { return }
        self.forget(stream)
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
        if self.streams.isEmpty {
            // An idle connection holds no stream table (`HTTP2StreamTable` lets it go) or header block storage.
            if self.headerBlock.streamID == 0 { self.headerBlock.release() }
        }
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
        if kind == .data || kind == .headers, flags & 0x1 != 0, let stream = self.stream(streamID),
            !stream.requestEnded
        {
            self.session.reset(streamID, .noError)
        }
    }
}
