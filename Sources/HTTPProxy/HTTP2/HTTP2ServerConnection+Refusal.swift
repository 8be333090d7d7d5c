import GateContract
import GatewayIO
import HTTP1
import PolicyModel

/// The gateway's own answers on a stream: JSON as over HTTP/1.1, or a trailers-only gRPC status.
extension HTTP2ServerConnection {
    func contentLengthMismatch(_ stream: HTTP2Stream) {
        let error = HTTP2RequestError(
            .contentLengthMismatch, "the DATA received does not add up to the request's content-length")
        guard stream.phase != .responded else {
            self.session.reset(stream.id, .protocolError)
            return
        }
        if let upstream = stream.upstream {
            stream.upstream = nil
            upstream.pool.release(upstream, reusable: false)
        }
        self.releaseHTTP2Upstream(stream)
        self.answerLocally(
            stream, .jsonError(status: error.status, code: error.code.rawValue, message: error.message),
            verdict: .malformed)
    }

    func refuse(_ stream: HTTP2Stream, _ response: LocalResponse, verdict: AttestVerdict) {
        self.answerLocally(stream, response, verdict: verdict)
    }

    func answerLocally(_ stream: HTTP2Stream, _ response: LocalResponse, verdict: AttestVerdict) {
        stream.exchange.logInfo = GateLogInfo(verdict: verdict)
        self.respondLocally(stream, response)
    }

    /// Writes the gateway's answer on `stream`: JSON as over HTTP/1.1, or, for a gRPC request,
    /// a trailers-only gRPC status (`GRPCRefusal`). Body bytes the client still sends are
    /// acknowledged and dropped.
    func respondLocally(_ stream: HTTP2Stream, _ response: LocalResponse) {
        if let pool = stream.waitingPool {
            pool.cancelWait(stream)
            stream.waitingPool = nil
        }
        self.releaseHTTP2Upstream(stream)
        stream.promise = nil
        stream.phase = .responded
        stream.upstreamDeadline = 0
        stream.bodyDeadline = 0
        stream.exchange.bufferedBody = nil
        self.releaseReservation(stream)
        if !stream.heldBody.isEmpty {
            self.session.consume(stream.id, stream.heldBody.count)
            stream.heldBody = []
        }
        let requestID = stream.exchange.correlation?.requestID ?? self.owner.loopContext.requestIDs.next()
        if stream.mapped?.isGRPC ?? stream.isGRPCGuess {
            let refusal = GRPCRefusal(response)
            stream.exchange.responseStatus = 200
            stream.responseComplete = true
            self.session.respond(
                stream.id, status: 200, headers: refusal.headers + [("x-request-id", requestID.text)], hasBody: false)
            return
        }
        stream.exchange.responseStatus = response.status
        var fields: [(String, String)] = response.headers.fields.map { ($0.name.lowercased(), $0.value) }
        fields.append(("content-length", String(response.body.count)))
        fields.append(("x-request-id", requestID.text))
        let hasBody = !stream.headRequest && !response.body.isEmpty
        if hasBody { stream.responseBody = response.body }
        stream.responseOffset = 0
        stream.responseComplete = true
        self.session.respond(stream.id, status: response.status, headers: fields, hasBody: hasBody)
    }
}
