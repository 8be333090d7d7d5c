/// The circuit breaker of an outbound client, in front of its peer's servers (Apple's,
/// Google's): a value, no clock of its own (the caller
/// passes `now`), so every transition is tested without sockets.
///
/// - closed: calls go through; `failureThreshold` consecutive failures (no answer, timeout,
///   TLS failure, 5xx) open it. An answer that is the peer's verdict on the request (200,
///   304, 400, 401, 404, 429) counts as a success: the peer is up.
/// - open: calls fail at once (`<peer>_unreachable`, `isBreakerOpen`) until `openDuration`
///   has passed; then one call is let through as a probe (half-open).
/// - half-open: the probe's success closes the breaker; its failure opens it again for
///   another `openDuration`. Other calls fail at once while the probe is out.
///
/// Why: when the peer is down every call would otherwise wait out its timeout, holding the
/// refresher's lease and the peer's connections; failing fast costs nothing.
package struct OutboundCircuitBreaker: Sendable, Hashable {
    package enum State: String, Sendable, Hashable {
        case closed, open
        case halfOpen = "half_open"

        /// The `attest_gateway_<peer>_breaker_state` gauge's value: 0 closed, 1 open, 2 half-open.
        package var gaugeValue: Int64 {
            switch self {
            case .closed: 0
            case .open: 1
            case .halfOpen: 2
            }
        }
    }

    /// What the caller does with a call it is about to make.
    package enum Admission: Sendable, Hashable {
        case proceed
        /// The half-open probe: its outcome decides the state.
        case probe
        case reject
    }

    package private(set) var state: State = .closed
    package private(set) var consecutiveFailures = 0
    /// Nanoseconds (the caller's monotonic clock) when the open state ends.
    private var reopensAt: UInt64 = 0
    private var probeOut = false
    package let failureThreshold: Int
    package let openNanoseconds: UInt64

    package init(failureThreshold: Int = 5, openDuration: Duration = .seconds(30)) {
        precondition(failureThreshold > 0, "a breaker opens after at least one failure")
        self.failureThreshold = failureThreshold
        let (seconds, attoseconds) = openDuration.components
        self.openNanoseconds = UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }

    /// Whether a call may go out at `now` (monotonic nanoseconds).
    package mutating func admit(now: UInt64) -> Admission {
        switch self.state {
        case .closed:
            return .proceed
        case .open:
            guard now >= self.reopensAt else { return .reject }
            self.state = .halfOpen
            self.probeOut = true
            return .probe
        case .halfOpen:
            if self.probeOut { return .reject }
            self.probeOut = true
            return .probe
        }
    }

    /// The outcome of an admitted call: `success` means the peer answered (any documented status
    /// but 5xx). Returns the new state when it changed (for the log and the gauge).
    @discardableResult
    package mutating func record(success: Bool, now: UInt64) -> State? {
        let before = self.state
        if success {
            self.consecutiveFailures = 0
            self.probeOut = false
            self.state = .closed
        } else {
            self.consecutiveFailures += 1
            switch self.state {
            case .closed:
                if self.consecutiveFailures >= self.failureThreshold { self.open(now: now) }
            case .halfOpen, .open:
                // The probe failed (or a call admitted before the breaker opened): open again.
                self.open(now: now)
            }
        }
        return self.state == before ? nil : self.state
    }

    private mutating func open(now: UInt64) {
        self.state = .open
        self.probeOut = false
        self.reopensAt = now &+ self.openNanoseconds
    }

    /// Whether the answer (or the absence of one) counts against the peer's health.
    package static func isFailure(_ result: Result<OutboundHTTPResponse, OutboundHTTPError>) -> Bool {
        switch result {
        case .success(let response): return response.status >= 500
        case .failure(let error):
            return error.code == .unreachable || error.code == .timedOut || error.code == .tlsFailed
                || error.code == .malformedAnswer
        }
    }
}
