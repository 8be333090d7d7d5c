/// Keeps one key's assertions within what the gateway's counter rule accepts.
///
/// The gateway accepts a counter `c` when `c > h` (the highest accepted), or, on routes with
/// `counter_window: N`, when `h - N < c <= h` and `c` was not seen. Counters follow the order
/// in which `generateAssertion` was called. So the window hands out tickets in generation
/// order, one generation at a time, and lets a new one start only while it is less than
/// `span = max(1, N)` tickets ahead of the oldest still in flight:
///
/// - `N = 0` (strict): span 1, one request of that key in flight at a time: assertion n+1 is
///   generated only after the gateway answered request n, so it can never arrive first.
/// - `N > 0`: up to N in flight; the oldest in flight is at most N-1 below any counter the
///   gateway has accepted meanwhile, so it is inside the window.
///
/// Not `Sendable`: lives inside `AssertionSequencer` (an actor), which supplies the waiting.
struct AssertionWindow {
    typealias Ticket = UInt64

    private var next: Ticket = 0
    /// Tickets handed out and not yet finished, ascending.
    private var inFlight: [Ticket] = []
    private var isGenerating = false

    /// Whether a ticket can be handed out now for a route of this `span`.
    func canStart(span: Int) -> Bool {
        guard !self.isGenerating else { return false }
        guard let oldest = self.inFlight.first else { return true }
        return self.next - oldest < UInt64(max(1, span))
    }

    /// Hands out the next ticket; the caller generates its assertion, then calls `generated`.
    mutating func start() -> Ticket {
        precondition(!self.isGenerating, "AssertionWindow.start while an assertion is being generated")
        let ticket = self.next
        self.next += 1
        self.inFlight.append(ticket)
        self.isGenerating = true
        return ticket
    }

    /// The assertion of `ticket` exists (or its generation failed): the next may be generated.
    mutating func generated(_ ticket: Ticket) {
        self.isGenerating = false
    }

    /// The gateway has answered the request of `ticket` (or it was never sent).
    mutating func finish(_ ticket: Ticket) {
        self.inFlight.removeAll { $0 == ticket }
    }

    var inFlightCount: Int { self.inFlight.count }
}
