package import GatewayIO

/// Who asked for a decision: the connection (or, with multiplexing, the stream) whose request
/// it is. Called on `promise.loop` only.
package protocol GateDecisionReceiver: AnyObject {
    func gateDecided(_ decision: GateDecision, promise: GateDecisionPromise)
}

/// One request's decision, bound to the loop of the connection that asked for it.
///
/// A gate fulfils it exactly once, from any queue; the receiver hears of it on `loop` and never
/// inside `RequestGate.decide`: a decision reached before `decide` returns (a refusal, a
/// passthrough route, a cached key whose counter went out on the loop's own Redis connection)
/// is held until the caller says `decide` returned, so the receiver is never re-entered while it
/// is still asking. A gate's store calls go out on `loop` too, so that their replies need no hop.
///
/// Confined to `loop` except for `succeed`, which hops there first when called elsewhere.
package final class GateDecisionPromise: @unchecked Sendable {
    package let loop: EventLoop
    private var state: State
    /// Held until the decision is delivered, then released (a closed connection is forgotten
    /// as soon as its last pending decision arrives).
    private var receiver: (any GateDecisionReceiver)?

    private enum State {
        /// `decide` has not returned yet.
        case asking
        /// Decided before `decide` returned.
        case decidedWhileAsking(GateDecision)
        /// `decide` returned; the decision is still to come.
        case awaiting
        case delivered
    }

    package init(loop: EventLoop, receiver: any GateDecisionReceiver) {
        self.loop = loop
        self.receiver = receiver
        self.state = .asking
    }

    /// The gate's decision. Exactly once per promise: a second call stops the process, since a
    /// request forwarded twice or answered twice is a security bug, not a recoverable state.
    package func succeed(_ decision: GateDecision) {
        guard self.loop.inLoop else {
            self.loop.execute { self.succeed(decision) }
            return
        }
        switch self.state {
        case .asking:
            self.state = .decidedWhileAsking(decision)
        case .awaiting:
            self.deliver(decision)
        case .decidedWhileAsking, .delivered:
            preconditionFailure("a gate decided one request twice")
        }
    }

    /// Called by the asker once `decide` returned: delivers a decision made meanwhile.
    package func askReturned() {
        self.loop.assertInLoop()
        switch self.state {
        case .asking:
            self.state = .awaiting
        case .decidedWhileAsking(let decision):
            self.deliver(decision)
        case .awaiting, .delivered:
            preconditionFailure("decide returned twice for one request")
        }
    }

    private func deliver(_ decision: GateDecision) {
        self.state = .delivered
        guard let receiver = self.receiver else { return }
        self.receiver = nil
        receiver.gateDecided(decision, promise: self)
    }
}

/// Passes a decision on, transformed: how a gate that wraps another (the check-only listener's
/// around the inline one) hears the inner gate's decision.
package final class GateDecisionRelay: GateDecisionReceiver {
    private let relay: (GateDecision) -> Void

    package init(_ relay: @escaping (GateDecision) -> Void) {
        self.relay = relay
    }

    package func gateDecided(_ decision: GateDecision, promise: GateDecisionPromise) {
        self.relay(decision)
    }
}
