import Dispatch
import GatewayIO
import GatewayTesting
import Synchronization
import Testing

@testable import GateContract

/// The decision's way back to the connection: on its loop, once, never inside `decide`.
@Suite struct GateDecisionPromiseTests {
    /// Records what a connection would see, and whether `decide` was still running.
    private final class Asker: GateDecisionReceiver, @unchecked Sendable {
        let loop: EventLoop
        var asking = false
        var heard: [(verdict: AttestVerdict, duringAsk: Bool, onLoop: Bool)] = []

        init(loop: EventLoop) { self.loop = loop }

        func gateDecided(_ decision: GateDecision, promise: GateDecisionPromise) {
            self.heard.append((decision.logInfo.verdict, self.asking, self.loop.inLoop))
        }

        /// Asks like `ProxyConnection.callDecide`: `decide` is the gate's body.
        func ask(_ decide: (GateDecisionPromise) -> Void) {
            let promise = GateDecisionPromise(loop: self.loop, receiver: self)
            self.asking = true
            decide(promise)
            self.asking = false
            promise.askReturned()
        }
    }

    private static func decision(_ verdict: AttestVerdict) -> GateDecision {
        .respond(LocalResponse(status: 200), GateLogInfo(verdict: verdict))
    }

    /// Runs `body` on `loop` and waits for it.
    private static func onLoop(_ loop: EventLoop, _ body: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            loop.execute {
                body()
                continuation.resume()
            }
        }
    }

    @Test func aDecisionMadeInsideDecideIsDeliveredAfterItReturns() async {
        let loop = TestEventLoop.next()
        let asker = Asker(loop: loop)
        await Self.onLoop(loop) {
            asker.ask { promise in promise.succeed(Self.decision(.verified)) }
            #expect(asker.heard.count == 1)
        }
        #expect(asker.heard.first?.verdict == .verified)
        #expect(asker.heard.first?.duringAsk == false)
    }

    @Test func aDecisionFromAnotherQueueArrivesOnTheLoop() async {
        let loop = TestEventLoop.next()
        let asker = Asker(loop: loop)
        let promises = Mutex<[GateDecisionPromise]>([])
        await Self.onLoop(loop) {
            asker.ask { promise in promises.withLock { $0.append(promise) } }
            #expect(asker.heard.isEmpty)
        }
        let promise = promises.withLock { $0[0] }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                promise.succeed(Self.decision(.skipped))
                // The hop is queued behind this: the loop runs it, then this check.
                loop.execute { continuation.resume() }
            }
        }
        #expect(asker.heard.count == 1)
        #expect(asker.heard.first?.verdict == .skipped)
        #expect(asker.heard.first?.onLoop == true)
        #expect(asker.heard.first?.duringAsk == false)
    }

    @Test func aDecisionLaterOnTheLoopIsDeliveredAtOnce() async {
        let loop = TestEventLoop.next()
        let asker = Asker(loop: loop)
        await Self.onLoop(loop) {
            let held = Mutex<GateDecisionPromise?>(nil)
            asker.ask { promise in held.withLock { $0 = promise } }
            held.withLock { $0 }?.succeed(Self.decision(.unknownKey))
            #expect(asker.heard.map(\.verdict) == [.unknownKey])
        }
    }

    @Test func aRelayPassesTheInnerGatesDecisionOnTransformed() async {
        let loop = TestEventLoop.next()
        let asker = Asker(loop: loop)
        await Self.onLoop(loop) {
            asker.ask { outer in
                let relay = GateDecisionRelay { _ in outer.succeed(Self.decision(.noRoute)) }
                let inner = GateDecisionPromise(loop: loop, receiver: relay)
                inner.succeed(Self.decision(.verified))
                inner.askReturned()
            }
        }
        #expect(asker.heard.map(\.verdict) == [.noRoute])
    }
}
