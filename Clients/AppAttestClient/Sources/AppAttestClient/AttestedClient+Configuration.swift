extension AttestedClient {
    /// Tuning; the defaults suit production apps.
    public struct Configuration: Sendable {
        /// Path of the gateway's policy document. Default `/app-attest/policy`.
        public var policyPath: String = "/app-attest/policy"
        /// Used while the policy document cannot be fetched: by default every request is signed
        /// (no challenge, `binding: request`, strict counters); a `challenge_missing` answer then
        /// makes the client retry once with a challenge.
        public var fallbackRoute = GatewayPolicyDocument.Route(mode: .enforce)
        /// Enrollment retries (Apple `serverUnavailable`, gateway 503/429, network).
        /// Default: 5 attempts, 1 s doubling to 60 s, jittered.
        public var enrollmentRetry = RetryPolicy()
        /// After an enrollment failed, further requests fail fast for this long instead of
        /// calling Apple again. Default 60 s.
        public var enrollmentCooldown: Duration = .seconds(60)
        /// Retries of protected requests the gateway refused without forwarding
        /// (`store_error`, `body_budget_exhausted`). Default: 3 attempts, 0.5 s to 10 s.
        public var requestRetry = RetryPolicy(
            maximumAttempts: 3,
            initialDelay: .milliseconds(500),
            maximumDelay: .seconds(10)
        )
        /// How long to wait before asking again for a policy document that could not be fetched.
        public var policyRetryInterval: Duration = .seconds(30)
        /// A cached gateway DeviceCheck token is exchanged again this long before it expires
        /// (clock differences, time in flight). Default 60 s.
        public var deviceCheckRenewalMargin: Duration = .seconds(60)
        #if DEBUG
            /// A debug token registered with the gateway's operator (DEBUG builds only). Sent as
            /// `X-App-Attest-Debug-Token` instead of an assertion on routes whose policy says
            /// `allow_debug_tokens: true`. Never compiled into release builds.
            public var debugToken: String?
        #endif

        public init() {}
    }
}
