/// Hands out each key's assertions in counter order, within its route's window
/// (`AssertionWindow`), and makes the tasks that must wait for their turn wait.
actor AssertionSequencer {
    private var windows: [String: AssertionWindow] = [:]
    private var waiters: [CheckedContinuation<Void, Never>] = []

    /// Waits until the window of `keyID` lets a new assertion start; a task cancelled while
    /// waiting gives up its turn (`CancellationError`) instead of spending a counter.
    func start(keyID: String, span: Int) async throws -> AssertionWindow.Ticket {
        while !self.windows[keyID, default: AssertionWindow()].canStart(span: span) {
            await withCheckedContinuation { self.waiters.append($0) }
        }
        try Task.checkCancellation()
        return self.windows[keyID, default: AssertionWindow()].start()
    }

    /// The assertion of `ticket` exists, or its generation failed.
    func generated(keyID: String, ticket: AssertionWindow.Ticket) {
        self.windows[keyID]?.generated(ticket)
        self.wakeWaiters()
    }

    /// The gateway answered the request of `ticket`, or it was never sent.
    func finish(keyID: String, ticket: AssertionWindow.Ticket) {
        self.windows[keyID]?.finish(ticket)
        self.wakeWaiters()
    }

    private func wakeWaiters() {
        let waiters = self.waiters
        self.waiters = []
        for waiter in waiters { waiter.resume() }
    }
}
