import GateContract
import GatewayIO
import HTTP1
import PolicyModel

/// A stream's request through the gate: the same steps as an HTTP/1.1 request (forwarding
/// facts, classification, the body cap and budget, `decide`), then the upstream head from
/// `UpstreamRequestPlan`.
extension HTTP2ServerConnection {
    func requestReceived(_ stream: HTTP2Stream, _ mapped: HTTP2MappedRequest) {
        var head = mapped.head
        stream.mapped = mapped
        stream.headRequest = head.method == "HEAD"
        let refusal = self.owner.prepareForwarding(head)
        stream.forwardedClient = self.owner.forwardedClient
        let proxies = self.owner.snapshot.trustedProxies
        var clientLimitKey = self.owner.peerLimitKey
        if stream.forwardedClient.peerIsTrusted {
            let clientAddress = proxies.clientAddress(peer: self.owner.peerAddress, forwardedFor: head.forwardedFor)
            clientLimitKey = IPAddressBytes.limitKey(clientAddress)
            stream.exchange.clientAddress = clientAddress
            stream.forwardedClient.originAddress = clientAddress
        }
        stream.exchange.correlation = RequestCorrelation.scan(
            head.headers, peerIsTrusted: stream.forwardedClient.peerIsTrusted,
            generate: { self.owner.loopContext.requestIDs.next() })
        let classification = self.owner.snapshot.gate.classify(head, client: clientLimitKey)
        stream.exchange.clientLimitKey = clientLimitKey
        stream.exchange.classification = classification
        let framing: RequestBodyFraming
        if let length = mapped.contentLength {
            framing = .contentLength(length)
        } else {
            framing = stream.requestEnded ? .none : .chunked
        }
        stream.exchange.info = HTTPRequestInfo(framing: framing, isKeepAlive: true, expectsContinue: false)
        head.versionMinor = 1
        stream.exchange.head = head
        if let refusal {
            self.refuse(stream, refusal.response, verdict: .rejected)
            return
        }
        if let cap = classification.bufferBodyUpTo {
            if let length = mapped.contentLength, length > UInt64(cap) {
                self.refuse(stream, ProxyError.bodyTooLarge(declared: length, cap: cap).response, verdict: .rejected)
                return
            }
            if stream.requestEnded || mapped.contentLength == 0 {
                self.callDecide(stream, body: [])
                return
            }
            stream.phase = .bufferingBody
            stream.bodyDeadline = max(self.loop.now &+ self.owner.timeouts.bufferedBody, 1)
            var body: [UInt8] = []
            if let length = mapped.contentLength {
                guard self.reserve(stream, Int(length)) else { return }
                body.reserveCapacity(Int(length))
            }
            stream.exchange.bufferedBody = body
            return
        }
        self.callDecide(stream, body: nil)
    }

    /// Grows the stream's reservation to `total` in the process-wide body budget and this
    /// connection's share; answers 503 `body_budget_exhausted` and returns false when either is spent.
    func reserve(_ stream: HTTP2Stream, _ total: Int) -> Bool {
        let growth = total - stream.exchange.bodyReservation.bytes
        if growth > 0 && self.bufferedBodyBytes + growth > Self.maxBufferedBodyBytesPerConnection {
            self.refuse(stream, ProxyError.bodyBudgetExhausted.response, verdict: .rejected)
            return false
        }
        guard stream.exchange.bodyReservation.cover(total, from: self.owner.server.bodyBudget) else {
            self.owner.server.metrics.bodyBudgetRejections.increment()
            self.refuse(stream, ProxyError.bodyBudgetExhausted.response, verdict: .rejected)
            return false
        }
        if growth > 0 { self.bufferedBodyBytes += growth }
        return true
    }

    func releaseReservation(_ stream: HTTP2Stream) {
        let held = stream.exchange.bodyReservation.bytes
        guard held > 0 else { return }
        self.bufferedBodyBytes -= held
        stream.exchange.bodyReservation.release(to: self.owner.server.bodyBudget)
    }

    func callDecide(_ stream: HTTP2Stream, body: [UInt8]?) {
        guard let head = stream.exchange.head, var classification = stream.exchange.classification else { return }
        classification.traced = stream.exchange.correlation?.trace?.span.sampled == true
        stream.phase = .deciding
        stream.bodyDeadline = 0
        stream.exchange.head?.headers = HTTPHeaders()
        let promise = GateDecisionPromise(loop: self.loop, receiver: stream)
        stream.promise = promise
        self.owner.snapshot.gate.decide(head, body: body, classification: classification, promise: promise)
        promise.askReturned()
    }

    func decisionArrived(_ decision: GateDecision, for stream: HTTP2Stream) {
        guard !self.isClosed, stream.phase == .deciding, self.streams.contains(stream) else { return }
        switch decision {
        case .forward(let head, let info):
            stream.exchange.logInfo = info
            guard let name = stream.exchange.classification?.upstream, let target = self.owner.upstreamTarget(name)
            else {
                self.upstreamFailed(.unavailable, for: stream)
                break
            }
            stream.exchange.target = target
            if target.http2Pools.isEmpty && stream.mapped?.isGRPC == true {
                let error = HTTP2RequestError(
                    .grpcUpstreamNotHTTP2,
                    "gRPC needs an upstream with protocol: h2 or h2c; upstream \(name) speaks HTTP/1.1")
                self.respondLocally(
                    stream, .jsonError(status: error.status, code: error.code.rawValue, message: error.message))
                break
            }
            if !target.http2Pools.isEmpty {
                self.forwardToHTTP2Upstream(stream, head, target: target)
                break
            }
            self.writeUpstreamHead(stream, head, target: target)
            if let body = stream.exchange.bufferedBody {
                stream.requestBytes.append(contentsOf: body)
                stream.exchange.bufferedBody = nil
            }
            stream.phase = .connecting
            self.armUpstreamDeadline(stream, connecting: true)
            self.acquireUpstream(stream, fresh: false)
        case .respond(let response, let info):
            stream.exchange.logInfo = info
            self.respondLocally(stream, response)
        }
        self.pump()
    }

    func writeUpstreamHead(_ stream: HTTP2Stream, _ head: HTTPRequestHead, target: UpstreamTarget) {
        let requestID = stream.exchange.correlation?.requestID ?? self.owner.loopContext.requestIDs.next()
        let (head, correlation) = ExchangeTracing.upstream(
            head, stream.exchange.correlation ?? RequestCorrelation(requestID: requestID))
        let bound = UpstreamRequestPlan.headBound(
            gateHead: head, client: &stream.forwardedClient, upstreamHost: target.hostHeader, requestID: requestID)
        let memory = self.owner.loopContext.headScratch(atLeast: bound)
        var writer = HeadWriter(UnsafeMutableRawBufferPointer(rebasing: memory[0..<bound]))
        stream.exchange.requestEncoding = UpstreamRequestPlan.writeHead(
            gateHead: head, framing: stream.exchange.info?.framing ?? .none,
            bufferedBodyCount: stream.exchange.bufferedBody?.count, client: &stream.forwardedClient,
            upstreamHost: target.hostHeader, correlation: correlation, into: &writer)
        stream.requestBytes.removeAll(keepingCapacity: true)
        UnsafeRawBufferPointer(rebasing: memory[0..<writer.count]).withMemoryRebound(to: UInt8.self) {
            stream.requestBytes.append(contentsOf: $0)
        }
    }
}
