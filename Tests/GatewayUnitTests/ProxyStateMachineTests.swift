import GatewayTesting
import Testing

@testable import HTTP1
@testable import HTTPProxy

/// `ProxyConnectionStateMachine` without sockets: events in, actions out.
@Suite struct ProxyStateMachineTests {
    typealias Machine = ProxyConnectionStateMachine

    private func headGET(_ machine: inout Machine, keepAlive: Bool = true) -> Machine.HeadAction {
        machine.headBytesReceived()
        return machine.requestHeadReceived(
            method: "GET", framing: .none, keepAlive: keepAlive, expectsContinue: false, bufferBodyUpTo: nil)
    }

    @Test func keepAliveExchangeReturnsToIdleAndReusesUpstream() {
        var machine = Machine()
        #expect(machine.timer == .headerRead)
        #expect(self.headGET(&machine) == .decide)
        #expect(machine.requestComplete)
        #expect(machine.wantsRequestBytes == false)
        #expect(machine.timer == .upstreamResponse)
        #expect(machine.decided(forward: true) == .connectUpstream(sendContinue: false))
        #expect(machine.timer == .upstreamConnect)
        machine.upstreamConnected()
        #expect(machine.phase == .exchanging)
        machine.responseStartedSending()
        #expect(machine.responseEnded(upstreamKeepAlive: true) == .finish(reusable: true, keepAlive: true))
        machine.exchangeFinished(keepAlive: true)
        #expect(machine.phase == .idle)
        #expect(machine.timer == .keepAliveIdle)
        #expect(machine.requestCount == 1)
    }

    @Test func connectionCloseAndUpstreamCloseAreHonoured() {
        var machine = Machine()
        _ = self.headGET(&machine, keepAlive: false)
        _ = machine.decided(forward: true)
        machine.upstreamConnected()
        #expect(machine.keepAliveAfterResponse == false)
        #expect(machine.responseEnded(upstreamKeepAlive: false) == .finish(reusable: false, keepAlive: false))
    }

    @Test func streamedBodyWithExpectContinueSendsContinueWhenForwarded() {
        var machine = Machine()
        let action = machine.requestHeadReceived(
            method: "PUT", framing: .contentLength(10), keepAlive: true, expectsContinue: true, bufferBodyUpTo: nil)
        #expect(action == .decide)
        #expect(machine.requestComplete == false)
        #expect(machine.decided(forward: true) == .connectUpstream(sendContinue: true))
        machine.upstreamConnected()
        #expect(machine.wantsRequestBytes)
        #expect(machine.timer == .bodyReadIdle)
        #expect(machine.requestEnded() == .none)
        #expect(machine.timer == .upstreamResponse)
        #expect(machine.responseEnded(upstreamKeepAlive: true) == .finish(reusable: true, keepAlive: true))
    }

    @Test func deniedStreamedBodyIsNotContinuedAndClosesTheConnection() {
        var machine = Machine()
        _ = machine.requestHeadReceived(
            method: "POST", framing: .chunked, keepAlive: true, expectsContinue: true, bufferBodyUpTo: nil)
        // No 100 Continue for a request the gate answers: the body is never read.
        #expect(machine.decided(forward: false) == .respondLocally(keepAlive: false))
        #expect(machine.localResponseWritten() == false)
        #expect(machine.phase == .closing)
    }

    @Test func bufferedBodyWithinTheCapIsDecidedWithTheBody() {
        var machine = Machine()
        let action = machine.requestHeadReceived(
            method: "POST", framing: .contentLength(100), keepAlive: true, expectsContinue: true, bufferBodyUpTo: 1000)
        #expect(action == .bufferBody(sendContinue: true))
        #expect(machine.phase == .bufferingBody)
        #expect(machine.wantsRequestBytes)
        #expect(machine.bufferedBodyReceived(total: 100) == .keepReading)
        #expect(machine.requestEnded() == .decide)
        // 100 Continue was already sent for the buffered body: not again.
        #expect(machine.decided(forward: true) == .connectUpstream(sendContinue: false))
    }

    @Test func aHeadRefusedByTheConnectionIsAnsweredAndCloses() {
        var machine = Machine()
        let refusal = ProxyError.invalidForwardedHeader("more than one X-Forwarded-Proto field")
        // A GET without body would keep the connection; the refusal closes it all the same.
        let action = machine.requestHeadReceived(
            method: "GET", framing: .none, keepAlive: true, expectsContinue: false, bufferBodyUpTo: nil,
            refusal: refusal)
        #expect(action == .reject(refusal))
        #expect(machine.phase == .respondingLocally)
        #expect(refusal.status == 400 && refusal.code.rawValue == "invalid_forwarded_header")
        #expect(machine.localResponseWritten() == false)
    }

    @Test func contentLengthBeyondTheCapIs413WithoutReadingTheBody() {
        var machine = Machine()
        let action = machine.requestHeadReceived(
            method: "POST", framing: .contentLength(5000), keepAlive: true, expectsContinue: true, bufferBodyUpTo: 1000)
        guard case .reject(let error) = action else {
            Issue.record("expected a rejection, got \(action)")
            return
        }
        let status = error.status
        let code = error.code.rawValue
        #expect(status == 413)
        #expect(code == "body_too_large")
        #expect(machine.keepAliveAfterResponse == false)
        #expect(machine.localResponseWritten() == false)
    }

    @Test func chunkedBodyGrowingBeyondTheCapIs413() {
        var machine = Machine()
        #expect(
            machine.requestHeadReceived(
                method: "POST", framing: .chunked, keepAlive: true, expectsContinue: false, bufferBodyUpTo: 1000)
                == .bufferBody(sendContinue: false))
        #expect(machine.bufferedBodyReceived(total: 600) == .keepReading)
        guard case .reject(let error) = machine.bufferedBodyReceived(total: 1200), error.status == 413 else {
            Issue.record("expected 413")
            return
        }
        #expect(machine.phase == .respondingLocally)
    }

    @Test func bodylessRequestOnABufferingRouteIsDecidedAtOnce() {
        var machine = Machine()
        #expect(
            machine.requestHeadReceived(
                method: "GET", framing: .contentLength(0), keepAlive: true, expectsContinue: true, bufferBodyUpTo: 10)
                == .decideWithEmptyBody)
        #expect(machine.expectsContinue == false)
    }

    @Test func earlyResponseBeforeTheBodyEndsClosesBothSides() {
        var machine = Machine()
        _ = machine.requestHeadReceived(
            method: "POST", framing: .contentLength(1_000_000), keepAlive: true, expectsContinue: false,
            bufferBodyUpTo: nil)
        _ = machine.decided(forward: true)
        machine.upstreamConnected()
        machine.responseStartedSending()
        #expect(machine.responseEnded(upstreamKeepAlive: true) == .finishAndClose(reusable: false))
        #expect(machine.phase == .closing)
    }

    @Test func idempotentRequestOnAStaleIdleConnectionIsRetriedOnce() {
        var machine = Machine()
        _ = self.headGET(&machine)
        _ = machine.decided(forward: true)
        machine.upstreamConnected()
        #expect(
            machine.upstreamFailed(
                .unavailable, anyResponseByte: false, wasIdlePooledConnection: true, requestReplayable: true)
                == .retry)
        #expect(machine.phase == .connecting)
        machine.upstreamConnected()
        let second = machine.upstreamFailed(
            .unavailable, anyResponseByte: false, wasIdlePooledConnection: true, requestReplayable: true)
        #expect(
            second
                == .respond(ProxyError(.upstreamUnavailable, "the upstream service is not reachable"), keepAlive: true))
    }

    @Test func noRetryForPostFreshConnectionsOrAfterAResponseByte() {
        var post = Machine()
        _ = post.requestHeadReceived(
            method: "POST", framing: .none, keepAlive: true, expectsContinue: false, bufferBodyUpTo: nil)
        _ = post.decided(forward: true)
        post.upstreamConnected()
        guard
            case .respond(let error, _) = post.upstreamFailed(
                .unavailable, anyResponseByte: false, wasIdlePooledConnection: true, requestReplayable: true),
            error.status == 502
        else {
            Issue.record("POST must not be retried")
            return
        }

        var fresh = Machine()
        _ = self.headGET(&fresh)
        _ = fresh.decided(forward: true)
        fresh.upstreamConnected()
        guard
            case .respond(let error, _) = fresh.upstreamFailed(
                .unavailable, anyResponseByte: false, wasIdlePooledConnection: false, requestReplayable: true),
            error.status == 502
        else {
            Issue.record("a fresh connection's failure is not retried")
            return
        }

        var partial = Machine()
        _ = self.headGET(&partial)
        _ = partial.decided(forward: true)
        partial.upstreamConnected()
        guard
            case .respond(let error, _) = partial.upstreamFailed(
                .unavailable, anyResponseByte: true, wasIdlePooledConnection: true, requestReplayable: true),
            error.status == 502
        else {
            Issue.record("a failure after response bytes is not retried")
            return
        }
    }

    @Test func failureAfterTheResponseStartedAbortsTheClient() {
        var machine = Machine()
        _ = self.headGET(&machine)
        _ = machine.decided(forward: true)
        machine.upstreamConnected()
        machine.responseStartedSending()
        #expect(
            machine.upstreamFailed(
                .unavailable, anyResponseByte: true, wasIdlePooledConnection: false, requestReplayable: true)
                == .abort)
        #expect(machine.phase == .closing)
    }

    @Test func upstreamFailuresMapToStatuses() {
        let cases: [(Machine.UpstreamFailure, Int, String)] = [
            (.unavailable, 502, "upstream_unavailable"),
            (.timeout, 504, "upstream_timeout"),
            (.invalidResponse, 502, "upstream_invalid_response"),
            (.poolExhausted, 503, "upstream_busy"),
        ]
        for (failure, status, code) in cases {
            var machine = Machine()
            _ = self.headGET(&machine)
            _ = machine.decided(forward: true)
            guard
                case .respond(let error, let keepAlive) = machine.upstreamFailed(
                    failure, anyResponseByte: false, wasIdlePooledConnection: false, requestReplayable: true)
            else {
                Issue.record("\(failure): expected a response")
                continue
            }
            #expect(error.status == status)
            #expect(error.code.rawValue == code)
            #expect(keepAlive)
            let continues = machine.localResponseWritten()
            #expect(continues)
            #expect(machine.phase == .idle)
        }
    }

    @Test func timersByPhase() {
        var idle = Machine()
        // No byte on a new connection: closed quietly when the header timer fires.
        #expect(idle.timerExpired(at: 0) == .closeQuietly)

        var slowloris = Machine()
        slowloris.headBytesReceived()
        #expect(slowloris.timer == .headerRead)
        guard case .respond(let error) = slowloris.timerExpired(at: 0), error.status == 408,
            error.code == .requestTimeout
        else {
            Issue.record("a started head that stalls is a 408")
            return
        }

        var waiting = Machine()
        _ = self.headGET(&waiting)
        _ = waiting.decided(forward: true)
        waiting.upstreamConnected()
        guard case .respond(let error) = waiting.timerExpired(at: 0), error.status == 504,
            error.code == .upstreamTimeout
        else {
            Issue.record("an upstream that does not answer is a 504")
            return
        }

        var streaming = Machine()
        _ = self.headGET(&streaming)
        _ = streaming.decided(forward: true)
        streaming.upstreamConnected()
        streaming.responseStartedSending()
        #expect(streaming.timerExpired(at: 0) == .abort)

        var keepAlive = Machine()
        _ = self.headGET(&keepAlive)
        _ = keepAlive.decided(forward: true)
        keepAlive.upstreamConnected()
        _ = keepAlive.responseEnded(upstreamKeepAlive: true)
        keepAlive.exchangeFinished(keepAlive: true)
        #expect(keepAlive.timer == .keepAliveIdle)
        #expect(keepAlive.timerExpired(at: 0) == .closeQuietly)
    }

    @Test func drainingClosesIdleConnectionsAndEndsBusyOnesAfterTheirResponse() {
        var idle = Machine()
        let closesNow = idle.drain()
        #expect(closesNow)

        var busy = Machine()
        _ = self.headGET(&busy)
        _ = busy.decided(forward: true)
        busy.upstreamConnected()
        #expect(busy.drain() == false)
        #expect(busy.responseEnded(upstreamKeepAlive: true) == .finish(reusable: true, keepAlive: false))

        var midHead = Machine()
        midHead.headBytesReceived()
        #expect(midHead.drain() == false)
    }

    @Test func invalidRequestClosesAfterTheErrorResponse() {
        var machine = Machine()
        machine.headBytesReceived()
        machine.requestInvalid()
        #expect(machine.phase == .respondingLocally)
        #expect(machine.localResponseWritten() == false)
        #expect(machine.phase == .closing)
    }

    @Test func idempotentMethodsAreTheRFCsAndCaseSensitive() {
        for method in ["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"] {
            #expect(ProxyConnectionStateMachine.isIdempotent(method), "\(method)")
        }
        for method in ["POST", "PATCH", "CONNECT", "get", "Get", "", "GETX", "PROPFIND"] {
            #expect(!ProxyConnectionStateMachine.isIdempotent(method), "\(method)")
        }
    }

    @Test func closingLingersThenCloses() {
        var machine = Machine()
        _ = self.headGET(&machine, keepAlive: false)
        _ = machine.decided(forward: false)
        #expect(machine.localResponseWritten() == false)
        #expect(machine.phase == .closing)
        machine.startLingering()
        #expect(machine.phase == .lingering)
        #expect(machine.timer == .linger)
        #expect(machine.wantsRequestBytes == false)
        #expect(machine.timerExpired(at: 0) == .closeQuietly)
        machine.closed()
        #expect(machine.isClosed)
        #expect(machine.timer == nil)
    }

    @Test func eachRequestStartsFromItsOwnData() {
        var machine = Machine()
        _ = machine.requestHeadReceived(
            method: "POST", framing: .contentLength(10), keepAlive: true, expectsContinue: true, bufferBodyUpTo: 100)
        #expect(machine.request?.continueSent == true)
        #expect(machine.bufferedBodyReceived(total: 10) == .keepReading)
        #expect(machine.requestEnded() == .decide)
        _ = machine.decided(forward: false)
        let continues = machine.localResponseWritten()
        #expect(continues)
        // Between requests there is no request data at all: nothing of the last one leaks.
        #expect(machine.phase == .idle)
        #expect(machine.request == nil)
        #expect(machine.continueSent == false)
        #expect(machine.bufferCap == nil)
        #expect(self.headGET(&machine) == .decide)
        #expect(machine.request?.continueSent == false)
        #expect(machine.request?.retried == false)
        #expect(machine.requestCount == 2)
    }

    @Test func aRetriedRequestIsNotRetriedTwice() {
        var machine = Machine()
        _ = self.headGET(&machine)
        _ = machine.decided(forward: true)
        machine.upstreamConnected()
        let first = machine.upstreamFailed(
            .unavailable, anyResponseByte: false, wasIdlePooledConnection: true, requestReplayable: true)
        #expect(first == .retry)
        #expect(machine.request?.retried == true)
        machine.upstreamConnected()
        guard
            case .respond(let error, let keepAlive) = machine.upstreamFailed(
                .unavailable, anyResponseByte: false, wasIdlePooledConnection: true, requestReplayable: true)
        else {
            Issue.record("the second failure is answered")
            return
        }
        #expect(error.code == .upstreamUnavailable)
        #expect(keepAlive)
    }
}
