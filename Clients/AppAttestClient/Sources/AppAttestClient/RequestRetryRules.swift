/// What a protected request does after each refusal of the gateway, and how often.
///
/// Each remedy is tried once per request: a refusal that survives it is the gateway's answer,
/// and retrying more would only spend counters, challenges or Apple calls. Refusals the gateway
/// gave without forwarding the request (store down, body budget, rate limit) are the only
/// ones worth waiting out, with `backoff`'s exponential, jittered delays.
struct RequestRetryRules {
    enum Action: Hashable {
        /// Sign again (a fresh assertion, and a fresh challenge where the route needs one).
        case retry
        /// Discard the key, then retry: the next attempt enrolls a new one.
        case newKey
        /// Record the key as revoked and throw the refusal.
        case revoke
        /// Fetch the policy document again, then retry on the route it gives.
        case refreshPolicy
        /// Wait, then retry.
        case backOff(Duration)
        /// Throw the refusal.
        case fail
    }

    private let backoff: RetryPolicy
    private var newKeyUsed = false
    private var replayRetried = false
    private var challengeRetried = false
    private var policyRefreshed = false
    private var backOffs = 0

    init(backoff: RetryPolicy) {
        self.backoff = backoff
    }

    /// After the gateway refused a signed request. `jitter` is in `0...1`.
    mutating func afterSignedRefusal(_ refusal: AttestedClientError, jitter: Double) -> Action {
        switch refusal.code {
        case .counterReplay where !self.replayRetried:
            self.replayRetried = true
            return .retry
        case .challengeInvalid where !self.challengeRetried:
            self.challengeRetried = true
            return .retry
        case .unknownKey:
            return self.newKeyAfterInvalidKey() ? .newKey : .fail
        case .revokedKey:
            return .revoke
        case .challengeMissing, .assertionMissing:
            return self.afterUnsignedRefusal(refusal)
        case .storeError, .bodyBudgetExhausted, .rateLimited:
            return self.backOff(after: refusal, jitter: jitter).map { .backOff($0) } ?? .fail
        default:
            return .fail
        }
    }

    /// After the gateway refused a request sent unsigned because the policy document said so:
    /// the document was stale when the gateway asks for an assertion or a challenge.
    mutating func afterUnsignedRefusal(_ refusal: AttestedClientError) -> Action {
        guard refusal.code == .assertionMissing || refusal.code == .challengeMissing, !self.policyRefreshed else {
            return .fail
        }
        self.policyRefreshed = true
        return .refreshPolicy
    }

    /// Whether Apple's `invalidKey` (or the gateway's `unknown_key`) still earns a new key.
    mutating func newKeyAfterInvalidKey() -> Bool {
        guard !self.newKeyUsed else { return false }
        self.newKeyUsed = true
        return true
    }

    /// The wait before retrying after `error` (at least its `Retry-After`); nil once the
    /// attempts are spent.
    mutating func backOff(after error: AttestedClientError, jitter: Double) -> Duration? {
        guard self.backOffs + 1 < self.backoff.maximumAttempts else { return nil }
        let delay = self.backoff.delay(beforeRetry: self.backOffs, retryAfter: error.retryAfter, jitter: jitter)
        self.backOffs += 1
        return delay
    }
}
