import GateContract
import GatewayIO
import HTTP1
import PolicyModel

/// The client side of an exchange: reading and parsing the request, the body budget, and the
/// gate's decision.
extension ProxyConnection {
    private var upstreamIsBackedUp: Bool {
        (self.upstream?.unsentRequestBytes ?? 0) > Self.highWaterMark
    }

    /// The phase wants request bytes parsed. Back-pressure does not stop parsing what is
    /// already buffered (at most one read, or `maxBufferedInput`): it only stops reading the
    /// socket. So a zero-byte `.end` after the last body bytes is never left behind.
    private var wantsClientInput: Bool {
        (self.machine.wantsRequestBytes || self.parserOwesEnd) && !self.machine.isClosed && self.http2 == nil
    }

    func processClientInput() {
        while self.wantsClientInput {
            if let input = self.client.input, !input.isEmpty {
                let phaseBefore = self.machine.phase
                let consumed = self.parseRequest(input.readableBytes)
                if self.machine.isClosed { return }
                input.consume(consumed)
                if consumed > 0 || self.machine.phase != phaseBefore { continue }
                if input.readableCount >= Self.maxBufferedInput { return }
            }
            guard self.client.mayRead && !self.client.readClosed && !self.upstreamIsBackedUp else { return }
            if !self.readClient() { return }
        }
    }

    /// One read from the client, parsed at once. Returns false when nothing more can be read now.
    private func readClient() -> Bool {
        let outcome: SocketChannel.ReadOutcome
        do {
            outcome = try self.client.readOnce()
        } catch {
            if self.client.transport.isHandshaking { self.handshakeFailed(error) }
            self.clientGone("client read error")
            return false
        }
        switch outcome {
        case .wouldBlock:
            return false
        case .endOfFile:
            self.clientEndOfFile()
            return false
        case .scratch(let bytes):
            let consumed = self.parseRequest(bytes)
            if consumed < bytes.count && !self.machine.isClosed {
                self.client.keep(UnsafeRawBufferPointer(rebasing: bytes[consumed...]))
            }
            return true
        case .appended:
            return true
        }
    }

    /// Feeds `buffer` to the parser while the phase wants request bytes; returns the bytes consumed.
    private func parseRequest(_ buffer: UnsafeRawBufferPointer) -> Int {
        if !self.protocolSettled {
            switch self.settleProtocol(buffer) {
            case .http1: break
            case .http2: return buffer.count
            case .undecided: return 0
            }
        }
        var offset = 0
        while self.wantsClientInput {
            let slice = UnsafeRawBufferPointer(rebasing: buffer[offset...])
            if self.machine.phase == .idle && !slice.isEmpty && !self.parserOwesEnd {
                self.machine.headBytesReceived()
            }
            let (event, consumed) = self.parser.next(slice)
            offset += consumed
            guard let event else { break }
            switch consume event {
            case .head(let head, let info):
                self.parserOwesEnd = false
                self.requestHeadReceived(head, info)
            case .body(let range):
                self.requestBodyReceived(UnsafeRawBufferPointer(rebasing: slice[range]))
            case .end(let trailers):
                if self.parserOwesEnd {
                    self.parserOwesEnd = false
                } else {
                    self.requestEnded(trailers: trailers)
                }
            case .error(let error):
                self.requestInvalid(error)
                return offset
            }
        }
        return offset
    }

    /// A TLS handshake failed (no shared protocol or cipher, a bad ClientHello, a refused client
    /// certificate): counted (`client_certificate` when mTLS refused the client's certificate or
    /// its absence, else `error`), and logged at most once a second with OpenSSL's reason.
    private func handshakeFailed(_ error: TransportError) {
        let refusedCertificate =
            self.tlsTransport?.verificationFailure != nil
            || error.description.contains("peer did not return a certificate")
        self.server.metrics.tlsHandshakeFailures.labels(refusedCertificate ? "client_certificate" : "error")
            .increment()
        guard let suppressed = self.server.handshakeFailureLog.admit() else { return }
        Log.info(
            "tls_handshake_failed",
            [("client", self.peerAddress), ("reason", error.description), ("suppressed", String(suppressed))])
    }

    private func clientEndOfFile() {
        switch self.machine.phase {
        case .idle:
            // Closed between requests (or mid-head): nothing more to answer. A response still
            // being written (a half-closed client) is flushed first.
            if self.client.hasUnsentOutput {
                self.machine.exchangeFinished(keepAlive: false)
            } else {
                self.close("client closed between requests")
            }
        case .bufferingBody, .deciding, .connecting, .exchanging:
            if !self.machine.requestComplete {
                // Gone mid-body: the upstream connection is in an unknown state.
                self.clientGone("client closed mid-body")
            }
        // Otherwise a half-close after a complete request: the response is still delivered.
        case .respondingLocally, .closing:
            break
        case .tunnelling, .lingering, .closed:
            preconditionFailure("client read in phase \(self.machine.phase)")
        }
    }

    // MARK: - Request events

    /// `head` is consumed: the exchange holds the only reference to its fields until the gate
    /// takes them (`callDecide`).
    private func requestHeadReceived(_ head: consuming HTTPRequestHead, _ info: HTTPRequestInfo) {
        assert(self.exchange.bodyReservation.bytes == 0, "the previous request's body reservation was not released")
        assert(self.exchange.addressReservedBytes == 0, "the previous request's address share was not released")
        let requestStart = SystemCalls.monotonicNanoseconds()
        self.refreshSnapshot()
        var refusal = self.prepareForwarding(head)
        let proxies = self.snapshot.trustedProxies
        var clientLimitKey = self.peerLimitKey
        if self.forwardedClient.peerIsTrusted {
            let clientAddress = proxies.clientAddress(peer: self.peerAddress, forwardedFor: head.forwardedFor)
            clientLimitKey = IPAddressBytes.limitKey(clientAddress)
            self.exchange.clientAddress = clientAddress
            // X-Real-IP names the client the gateway logs and limits (docs/design-notes.md).
            self.forwardedClient.originAddress = clientAddress
        }
        self.exchange.correlation = RequestCorrelation.scan(
            head.headers, peerIsTrusted: self.forwardedClient.peerIsTrusted,
            generate: { self.loopContext.requestIDs.next() })
        let classification = self.snapshot.gate.classify(head, client: clientLimitKey)
        if classification.upstream != nil && self.snapshot.websocketRoutes.contains(classification.routeName) {
            switch WebSocketUpgrade.request(head, framing: info.framing) {
            case .none: break
            case .websocket(let key): self.exchange.websocketKey = key
            case .invalid(let error): refusal = refusal ?? error
            }
        }
        // The last exchange was reset when it finished: only this request's fields are set.
        self.exchange.clientLimitKey = clientLimitKey
        self.exchange.requestStart = requestStart
        let method = head.method
        self.exchange.head = consume head
        self.exchange.info = info
        self.exchange.classification = classification
        self.parserOwesEnd = info.framing == .none || info.framing == .contentLength(0)
        let action = self.machine.requestHeadReceived(
            method: method, framing: info.framing, keepAlive: info.isKeepAlive,
            expectsContinue: info.expectsContinue, bufferBodyUpTo: classification.bufferBodyUpTo,
            bufferedBodyDeadline: classification.bufferBodyUpTo == nil
                ? nil : requestStart &+ self.timeouts.bufferedBody,
            refusal: refusal, asksUpgrade: self.exchange.websocketKey != nil)
        switch action {
        case .decide:
            self.callDecide(body: nil)
        case .decideWithEmptyBody:
            self.callDecide(body: [])
        case .bufferBody(let sendContinue):
            var body: [UInt8] = []
            if case .contentLength(let length) = info.framing {
                // The whole declared body at once: it is allocated at once too.
                guard self.reserveBody(Int(length)) else { return }
                body.reserveCapacity(Int(length))
            }
            self.exchange.bufferedBody = body
            if sendContinue { self.client.queue(Self.continueBytes) }
        case .reject(let error):
            self.answerLocally(error.response, verdict: .rejected)
        }
    }

    /// This request's side of the upstream head: whether the peer is a trusted proxy (a reload
    /// may change it), the reserved subject header names, and the verified certificate subject.
    /// (The other headers proxies set to name the client change only with the snapshot:
    /// `refreshSnapshot`.)
    /// Returns the refusal when a trusted peer's forwarding fields are ambiguous.
    func prepareForwarding(_ head: HTTPRequestHead) -> ProxyError? {
        let proxies = self.snapshot.trustedProxies
        self.forwardedClient.peerIsTrusted = !proxies.isEmpty && proxies.contains(self.peerAddress)
        self.forwardedClient.reservedSubjectHeaders = self.snapshot.clientSubjectHeaders
        if !self.subjectResolved {
            // A head arrives only after the handshake: the subject is final by now.
            self.subjectResolved = true
            if let tls = self.tlsTransport {
                self.tlsVersion = tls.negotiatedProtocol
                if let subject = tls.verifiedPeerSubject {
                    self.forwardedClient.subject = ClientSubjectHeaders.fieldValue(subject)
                }
            }
        }
        if self.context.checkOnly && !proxies.isEmpty && !self.forwardedClient.peerIsTrusted {
            return .authzUntrustedPeer
        }
        guard self.forwardedClient.peerIsTrusted, let reason = ForwardedHeaders.refusal(in: head.headers) else {
            return nil
        }
        return .invalidForwardedHeader(reason)
    }

    private func requestBodyReceived(_ bytes: UnsafeRawBufferPointer) {
        self.exchange.bodyBytesIn &+= UInt64(bytes.count)
        switch self.machine.phase {
        case .bufferingBody:
            // A chunked body reserves as it arrives (beyond the route's cap 413 comes first).
            let total = (self.exchange.bufferedBody?.count ?? 0) + bytes.count
            if total <= self.machine.bufferCap ?? Int.max {
                guard self.reserveBody(total) else { return }
            }
            self.exchange.bufferedBody?.append(contentsOf: bytes)
            if case .reject(let error) = self.machine.bufferedBodyReceived(total: total) {
                self.exchange.bufferedBody = nil
                self.answerLocally(error.response, verdict: .rejected)
            }
        case .exchanging:
            guard let upstream = self.upstream else { return }
            switch self.exchange.requestEncoding {
            case .chunked:
                var framing = self.takeScratchBytes()
                HTTPSerializer.writeChunk(bytes, into: &framing)
                upstream.send(framing)
                self.returnScratchBytes(framing)
            case .identity, .none:
                upstream.send(bytes)
            }
        case .idle, .deciding, .connecting, .respondingLocally, .tunnelling, .closing, .lingering, .closed:
            preconditionFailure("request body in phase \(self.machine.phase)")
        }
    }

    private func requestEnded(trailers: HTTPHeaders?) {
        if self.machine.phase == .exchanging, self.exchange.requestEncoding == .chunked, let upstream = self.upstream {
            var framing = self.takeScratchBytes()
            HTTPSerializer.writeLastChunk(
                trailers: HeaderRewriting.forwardedTrailers(
                    trailers, reserved: self.forwardedClient.reservedSubjectHeaders,
                    trust: self.forwardedClient.trustHeaders),
                into: &framing)
            upstream.send(framing)
            self.returnScratchBytes(framing)
        }
        switch self.machine.requestEnded() {
        case .none:
            break
        case .decide:
            self.callDecide(body: self.exchange.bufferedBody ?? [])
        case .complete(let keepAlive):
            self.finishRequest(keepAlive: keepAlive && !self.exchange.responseCloseAfter)
        }
    }

    private func requestInvalid(_ error: HTTPParserError) {
        if let upstream = self.upstream {
            self.releaseUpstream(upstream, reusable: false)
        }
        self.cancelWaiting()
        if self.machine.responseStarted {
            self.abort("invalid request after the response started")
            return
        }
        if self.exchange.head == nil || self.machine.phase == .idle {
            self.exchange.head = nil
            self.exchange.refusedRequestLine = self.parser.refusedRequestLine
            self.exchange.requestStart = SystemCalls.monotonicNanoseconds()
        }
        self.machine.requestInvalid()
        self.answerLocally(
            .jsonError(
                status: error.status, code: error.code, message: "the request is not valid HTTP/1.1 (\(error.code))"),
            verdict: .malformed)
    }

    /// Writes the gateway's own answer (the connection closes after it unless the request was
    /// complete and kept alive) and ends the exchange.
    private func answerLocally(_ response: LocalResponse, verdict: AttestVerdict) {
        self.exchange.proxyAnswered()
        self.exchange.logInfo = GateLogInfo(verdict: verdict)
        self.queueLocalResponse(response, keepAlive: false)
        self.finishRequest(keepAlive: self.machine.localResponseWritten())
    }

    // MARK: - Body budget

    /// Grows the body's reservation in the process-wide budget to `total` bytes. When the
    /// budget cannot, answers 503 `body_budget_exhausted` (the connection closes) and returns false.
    private func reserveBody(_ total: Int) -> Bool {
        guard self.reserveAddressShare(total) else { return false }
        let budget = self.server.bodyBudget
        if self.exchange.bodyReservation.cover(total, from: budget) { return true }
        self.server.metrics.bodyBudgetRejections.increment()
        if let suppressed = budget.logThrottle.admit() {
            Log.warning(
                "body_budget_exhausted",
                [
                    ("route", self.exchange.classification?.routeName ?? "-"),
                    ("request_id", self.requestID.text), ("body_bytes", String(total)),
                    ("buffered_bytes", String(budget.inUse)), ("max_buffered_body_bytes", String(budget.limit)),
                    ("suppressed", String(suppressed)),
                ])
        }
        guard case .reject(let error) = self.machine.bodyBudgetExhausted() else { return false }
        self.exchange.bufferedBody = nil
        self.answerLocally(error.response, verdict: .rejected)
        return false
    }

    /// Grows what the client address holds of `limits.max_buffered_body_bytes_per_address` to
    /// `total`; when it cannot, answers 429 `rate_limited` (the connection closes) and returns
    /// false. One address can so hold at most its share of the global budget.
    private func reserveAddressShare(_ total: Int) -> Bool {
        let delta = total - self.exchange.addressReservedBytes
        guard delta > 0 else { return true }
        let limit = self.snapshot.limits.maxBufferedBodyBytesPerAddress
        let clientKey = self.exchange.clientLimitKey
        if self.server.addressBodyBytes.tryAdd(clientKey, delta, limit: limit) {
            self.exchange.addressReservedBytes = total
            return true
        }
        self.server.metrics.limitRefusals.labels("body_bytes_per_address").increment()
        if let suppressed = self.server.bodyBudget.logThrottle.admit() {
            Log.warning(
                "rate_limited",
                [
                    ("limit", "body_bytes_per_address"), ("route", self.exchange.classification?.routeName ?? "-"),
                    ("request_id", self.requestID.text),
                    ("body_bytes", String(total)),
                    ("held_by_address", String(self.server.addressBodyBytes.held(clientKey))),
                    ("max_buffered_body_bytes_per_address", String(limit)), ("suppressed", String(suppressed)),
                ])
        }
        guard case .reject = self.machine.bodyBudgetExhausted() else { return false }
        self.exchange.bufferedBody = nil
        let error = ProxyError(
            .rateLimited, "this address holds its share of the gateway's buffered request bodies; retry later")
        self.answerLocally(error.response, verdict: .rateLimited)
        return false
    }

    /// Gives back the current request's body bytes: the global budget and the address's share.
    func releaseBodyReservation() {
        if self.exchange.bodyReservation.bytes > 0 { self.exchange.bodyReservation.release(to: self.server.bodyBudget) }
        if self.exchange.addressReservedBytes > 0 {
            self.server.addressBodyBytes.remove(self.exchange.clientLimitKey, self.exchange.addressReservedBytes)
            self.exchange.addressReservedBytes = 0
        }
    }

    /// A buffered body missed `limits.buffered_body_timeout`: counted and logged (at most one
    /// line a second) with the route and how much of the body had arrived; the 408 follows.
    func bufferedBodyTimedOut() {
        let route = self.exchange.classification?.routeName ?? "-"
        self.server.metrics.bufferedBodyTimeouts.labels(route).increment()
        guard let suppressed = self.server.bodyBudget.timeoutLogThrottle.admit() else { return }
        var declared = "-"
        switch self.exchange.info?.framing {
        case .contentLength(let length): declared = String(length)
        case .chunked: declared = "chunked"
        case .some(.none), nil: break
        }
        Log.warning(
            "buffered_body_timeout",
            [
                ("route", route), ("client", self.peerAddress), ("request_id", self.requestID.text),
                ("body_bytes_received", String(self.exchange.bufferedBody?.count ?? 0)),
                ("body_bytes_declared", declared),
                ("buffered_body_timeout", PolicyValues.format(self.snapshot.limits.bufferedBodyTimeout)),
                ("suppressed", String(suppressed)),
            ])
    }

    // MARK: - The gate

    private func callDecide(body: [UInt8]?) {
        guard let head = self.exchange.head, var classification = self.exchange.classification else {
            preconditionFailure("decide without a request head")
        }
        // The gate gets the only reference to the fields (it adds its own to the head it
        // forwards); the exchange keeps the request line for the log and the response.
        self.exchange.head?.headers = HTTPHeaders()
        self.exchange.gateAsked = true
        if self.exchange.correlation?.trace?.span.sampled == true {
            self.exchange.correlation?.trace?.gateStart = SystemCalls.monotonicNanoseconds()
            classification.traced = true
        }
        let promise = GateDecisionPromise(loop: self.loop, receiver: self)
        self.pendingDecision = promise
        self.snapshot.gate.decide(consume head, body: body, classification: classification, promise: promise)
        promise.askReturned()
    }

    func gateDecided(_ decision: GateDecision, promise: GateDecisionPromise) {
        // A decision for a request this connection no longer waits for (it closed) is dropped.
        guard promise === self.pendingDecision else { return }
        self.pendingDecision = nil
        self.decisionArrived(decision)
    }

    private func decisionArrived(_ decision: GateDecision) {
        self.loop.assertInLoop()
        guard !self.machine.isClosed, self.machine.phase == .deciding else { return }
        if self.exchange.correlation?.trace?.span.sampled == true {
            self.exchange.correlation?.trace?.gateEnd = SystemCalls.monotonicNanoseconds()
        }
        switch decision {
        case .forward(let head, let info):
            self.exchange.logInfo = info
            guard case .connectUpstream(let sendContinue) = self.machine.decided(forward: true) else { return }
            if sendContinue { self.client.queue(Self.continueBytes) }
            guard let name = self.exchange.classification?.upstream, let target = self.upstreamTarget(name) else {
                self.handleUpstreamFailure(.unavailable, wasIdle: false, anyByte: false)
                break
            }
            self.exchange.target = target
            self.exchange.requestEncoding = self.writeUpstreamHead(head, target: target)
            if let body = self.exchange.bufferedBody {
                self.requestBytes.append(contentsOf: body)
                self.exchange.bufferedBody = nil
            }
            self.acquireUpstream(fresh: false)
        case .respond(let response, let info):
            self.exchange.logInfo = info
            guard case .respondLocally(let keepAlive) = self.machine.decided(forward: false) else { return }
            self.queueLocalResponse(response, keepAlive: keepAlive)
            self.finishRequest(keepAlive: self.machine.localResponseWritten())
        }
        self.pump()
    }
}
