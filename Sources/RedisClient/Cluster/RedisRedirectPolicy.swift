/// What to do with one reply of a routed cluster command: pure, tested without sockets.
///
/// Retrying is safe for exactly the replies that say the command did not run: `MOVED`, `ASK`,
/// `TRYAGAIN`, `CLUSTERDOWN`. A command whose connection failed may have run (a counter
/// advance among them): it is never retried, the caller gets the store error.
package struct RedisRedirectPolicy: Sendable, Hashable {
    /// Redirects and retries one command may take before it fails. Default 5.
    package var maximumAttempts: Int
    /// First `TRYAGAIN`/`CLUSTERDOWN` delay, doubled per retry. Default 20 ms.
    package var initialRetryDelay: Duration
    /// Cap of that delay. Default 200 ms (5 attempts stay well inside a request's timeout).
    package var maximumRetryDelay: Duration

    package init(
        maximumAttempts: Int = 5,
        initialRetryDelay: Duration = .milliseconds(20),
        maximumRetryDelay: Duration = .milliseconds(200)
    ) {
        self.maximumAttempts = max(1, maximumAttempts)
        self.initialRetryDelay = initialRetryDelay
        self.maximumRetryDelay = max(maximumRetryDelay, initialRetryDelay)
    }

    package enum Action: Sendable, Hashable {
        /// Give the reply to the caller.
        case complete
        /// `MOVED`: record `slot` → `node` in the map, refresh the topology soon, resend there.
        case moved(slot: Int, node: RedisNodeAddress)
        /// `ASK`: resend once to `node` behind `ASKING`; the map stays.
        case ask(node: RedisNodeAddress)
        /// `TRYAGAIN` / `CLUSTERDOWN` / no primary for the slot: resend after `delay`
        /// (refreshing the topology first when `refresh`).
        case retry(after: Duration, refresh: Bool)
        /// Out of attempts: fail with this reason.
        case fail(RedisClusterError)
    }

    /// `attempt` counts from 1 (the first send). `errorText` is the error reply's text (nil
    /// for any other reply); `node` answered it.
    package func action(errorText: String?, from node: RedisNodeAddress, attempt: Int) -> Action {
        guard let errorText, let redirect = RedisRedirect(errorText: errorText, currentHost: node.host) else {
            return .complete
        }
        guard attempt < self.maximumAttempts else {
            return .fail(.tooManyRedirects("\(errorText.prefix(60)) after \(attempt) attempts"))
        }
        switch redirect {
        case .moved(let slot, let target): return .moved(slot: slot, node: target)
        case .ask(_, let target): return .ask(node: target)
        case .retryLater(let code): return .retry(after: self.delay(attempt: attempt), refresh: code == "CLUSTERDOWN")
        }
    }

    /// No primary known for the slot (failover in progress, first map not loaded).
    package func actionForUnassignedSlot(_ slot: Int, attempt: Int) -> Action {
        guard attempt < self.maximumAttempts else { return .fail(.slotUnassigned(slot)) }
        return .retry(after: self.delay(attempt: attempt), refresh: true)
    }

    /// `initialRetryDelay · 2^(attempt-1)`, capped.
    package func delay(attempt: Int) -> Duration {
        var delay = self.initialRetryDelay
        for _ in 1..<max(1, attempt) where delay < self.maximumRetryDelay { delay *= 2 }
        return min(delay, self.maximumRetryDelay)
    }
}
