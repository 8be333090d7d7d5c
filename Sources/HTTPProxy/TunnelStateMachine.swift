/// The life of one WebSocket tunnel, as a value: which sides have finished sending, when the
/// tunnel must end (idle timeout, maximum lifetime), and why it ended. `TunnelRelay` moves the
/// bytes and executes what this returns; tested without sockets (`TunnelStateMachineTests`).
///
/// A side's end of file is passed on as a half-close once what it sent before is written
/// (the other side may still answer: WebSocket's closing handshake, a server that sends its
/// last frames after the client's FIN). The tunnel ends when both sides have finished, or at
/// the first deadline.
package struct TunnelStateMachine: Sendable, Hashable {
    package enum Side: Sendable, Hashable {
        case client, upstream

        package var other: Side { self == .client ? .upstream : .client }
    }

    /// Why a tunnel ended: the label of `attest_gateway_tunnels_closed_total`.
    package enum CloseReason: String, Sendable, Hashable, CaseIterable {
        /// The client finished first (its FIN), then the upstream.
        case clientClosed = "client_closed"
        /// The upstream finished first, then the client.
        case upstreamClosed = "upstream_closed"
        /// Nothing moved either way for `tunnels.idle_timeout`.
        case idleTimeout = "idle_timeout"
        /// `tunnels.max_lifetime` after the upgrade.
        case maxLifetime = "max_lifetime"
        /// A read or write failed (a reset), on either side.
        case error
        /// The gateway shut down (the drain timeout passed with the tunnel still open).
        case shutdown
    }

    package enum Action: Sendable, Hashable {
        case none
        /// Half-close `side`'s output once what is queued for it is written.
        case shutDownOutput(of: Side)
        /// Both sides have finished: close once both outputs are written.
        case finishAfterFlushing(CloseReason)
    }

    private enum State: Sendable, Hashable {
        /// Both sides send.
        case relaying
        /// `Side` sent its FIN first; the other still sends.
        case halfClosed(by: Side)
        /// Both finished (the reason names who was first), or a deadline or failure ended it.
        case ended(CloseReason)
    }

    private var state: State = .relaying
    /// Monotonic ns: the upgrade, and the last byte moved in either direction.
    package let startedAt: UInt64
    package private(set) var lastActivity: UInt64
    let idleTimeout: UInt64
    let maxLifetime: UInt64

    package init(startedAt: UInt64, idleTimeout: UInt64, maxLifetime: UInt64) {
        self.startedAt = startedAt
        self.lastActivity = startedAt
        self.idleTimeout = idleTimeout
        self.maxLifetime = maxLifetime
    }

    /// The reason the tunnel ended; nil while it runs.
    package var endReason: CloseReason? {
        if case .ended(let reason) = self.state { return reason }
        return nil
    }

    /// Bytes moved (either way) at `now`: the idle timeout starts again.
    package mutating func bytesMoved(at now: UInt64) {
        self.lastActivity = max(self.lastActivity, now)
    }

    /// `side` sent its FIN (a read returned end of file).
    package mutating func endOfFile(from side: Side) -> Action {
        switch self.state {
        case .relaying:
            self.state = .halfClosed(by: side)
            return .shutDownOutput(of: side.other)
        case .halfClosed(let first) where first != side:
            let reason: CloseReason = first == .client ? .clientClosed : .upstreamClosed
            self.state = .ended(reason)
            return .finishAfterFlushing(reason)
        case .halfClosed, .ended:
            return .none
        }
    }

    /// A read or write failed on either side: the tunnel ends now (nothing can be delivered in order).
    package mutating func failed() {
        guard self.endReason == nil else { return }
        self.state = .ended(.error)
    }

    /// The gateway closes the tunnel (shutdown).
    package mutating func shutDown() {
        guard self.endReason == nil else { return }
        self.state = .ended(.shutdown)
    }

    /// When the tunnel must end if nothing moves: the earlier of the idle and lifetime deadlines.
    package var deadline: UInt64 {
        min(self.lastActivity &+ self.idleTimeout, self.startedAt &+ self.maxLifetime)
    }

    /// The timer fired at `now`: returns the reason when a deadline has passed (the tunnel has
    /// ended), nil when activity moved the idle deadline past `now` (re-arm for `deadline`).
    package mutating func timerFired(at now: UInt64) -> CloseReason? {
        guard self.endReason == nil else { return self.endReason }
        let reason: CloseReason
        if now >= self.startedAt &+ self.maxLifetime {
            reason = .maxLifetime
        } else if now >= self.lastActivity &+ self.idleTimeout {
            reason = .idleTimeout
        } else {
            return nil
        }
        self.state = .ended(reason)
        return reason
    }
}
