import Foundation

/// The install's App Attest key from generation to `attested`: generateKey (or the `pending`
/// key a killed launch left), a challenge, attestKey, `POST` attest, each step saved so that a
/// relaunch resumes instead of paying Apple for another attestation.
///
/// One enrollment at a time, shared by every request that needs the key meanwhile. A failed
/// enrollment makes later requests fail fast for `cooldown`, so that a device offline or
/// refused does not call Apple on every request.
actor KeyEnrollment {
    private let storage: KeyStorage
    private let service: any AppAttestService
    private let api: GatewayAPI
    private let policy: PolicyCache
    private let clock: any AttestClock
    private let appID: String?
    private let retry: RetryPolicy
    private let cooldown: Duration
    /// App Attest failures go to the gateway's report endpoint (best effort, in the background).
    private let reporter: AttestationFailureReporter
    /// Locked rather than isolated: `AttestedClient.resetKey()` is synchronous and clears it.
    private let blocked = Blocked()
    private var running: Task<String, any Error>?

    init(
        storage: KeyStorage,
        service: any AppAttestService,
        api: GatewayAPI,
        policy: PolicyCache,
        clock: any AttestClock,
        appID: String?,
        retry: RetryPolicy,
        cooldown: Duration
    ) {
        self.storage = storage
        self.service = service
        self.api = api
        self.policy = policy
        self.clock = clock
        self.appID = appID
        self.retry = retry
        self.cooldown = cooldown
        self.reporter = AttestationFailureReporter(api: api, policy: policy)
    }

    /// Forgets the key and any cooldown: the next protected request enrolls a new key.
    nonisolated func reset() throws(AttestedClientError) {
        try self.storage.delete()
        self.blocked.value = nil
    }

    /// The gateway does not know `keyID` (or Apple says it is unusable): the next request of
    /// any task enrolls a new one.
    func discard(_ keyID: String) throws(AttestedClientError) {
        try self.storage.discard(keyID)
    }

    /// The gateway answered `revoked_key`: protected requests fail fast until `reset()`.
    func revoke(_ keyID: String) throws(AttestedClientError) {
        try self.storage.save(StoredKey(keyID: keyID, state: .revoked))
    }

    /// The attested key ID; enrolls (once, shared) when there is none.
    func attestedKeyID() async throws -> String {
        if let stored = try self.storage.load() {
            switch stored.state {
            case .attested:
                return stored.keyID
            case .revoked:
                throw AttestedClientError(
                    .revokedKey,
                    "the operator revoked this install's key; resetKey() enrolls a new one",
                    status: 401
                )
            case .pending:
                break
            }
        }
        if let running = self.running { return try await running.value }
        if let blocked = self.blocked.value, self.clock.now() < blocked.until {
            let left = blocked.until.timeIntervalSince(self.clock.now())
            throw AttestedClientError(
                blocked.error.code,
                "enrollment failed recently (\(blocked.error.message)); next try in \(Int(left.rounded(.up))) s",
                status: blocked.error.status,
                retryAfter: .milliseconds(Int64(left * 1000)),
                underlying: blocked.error.underlying
            )
        }
        let task = Task { try await self.enroll() }
        self.running = task
        defer { self.running = nil }
        do {
            let keyID = try await task.value
            self.blocked.value = nil
            return keyID
        } catch let error as AttestedClientError {
            // A broken key store is the app's to fix, not a reason to hold back the next try.
            if error.code != .keyStorage {
                self.blocked.value = (self.clock.now().addingTimeInterval(self.cooldown.timeInterval), error)
            }
            throw error
        }
    }

    private func newKey() async throws -> String {
        let keyID: String
        do {
            keyID = try await self.service.generateKey()
        } catch let error as AppAttestServiceError {
            self.reporter.report(error)
            if error.kind == .featureUnsupported {
                throw AttestedClientError(.appAttestUnsupported, "generateKey: \(error)", underlying: error)
            }
            throw AttestedClientError(.appAttestFailed, "generateKey failed: \(error)", underlying: error)
        } catch {
            throw AttestedClientError(.appAttestFailed, "generateKey failed: \(error)", underlying: error)
        }
        // Saved BEFORE attestKey: a kill from here on resumes with this key.
        try self.storage.save(StoredKey(keyID: keyID, state: .pending))
        return keyID
    }

    /// generateKey (or the pending key) → challenge → attestKey → POST attest, with backoff.
    private func enroll() async throws -> String {
        if let appID = self.appID, let document = await self.policy.document(force: false),
            let accepted = document.appIDs, !accepted.contains(appID)
        {
            throw AttestedClientError(.appIDNotAccepted, "the gateway accepts \(accepted), not \(appID)")
        }
        var keyID: String
        if let stored = try self.storage.load(), stored.state == .pending {
            keyID = stored.keyID
        } else {
            keyID = try await self.newKey()
        }
        var regenerated = false
        var attestation: (challenge: String, object: Data)?
        var retries = 0
        while true {
            let failure: AttestedClientError
            do {
                if attestation == nil {
                    let challenge = try await self.api.challenge(at: await self.policy.challengePath)
                    let object = try await self.service.attestKey(
                        keyID,
                        clientDataHash: ClientData.hash(Data(challenge.utf8))
                    )
                    attestation = (challenge, object)
                }
                if let (challenge, object) = attestation {
                    try await self.api.register(
                        at: await self.policy.attestPath, keyID: keyID, attestation: object, challenge: challenge)
                }
                try self.storage.save(StoredKey(keyID: keyID, state: .attested))
                return keyID
            } catch let error as AppAttestServiceError {
                self.reporter.report(error)
                switch error.kind {
                case .serverUnavailable:
                    failure = AttestedClientError(.appAttestFailed, "attestKey: Apple unavailable", underlying: error)
                case .invalidKey where !regenerated:
                    // The key cannot be attested (e.g. restored from another device): one new key.
                    regenerated = true
                    try? self.storage.delete()
                    keyID = try await self.newKey()
                    attestation = nil
                    continue
                case .featureUnsupported:
                    throw AttestedClientError(.appAttestUnsupported, "attestKey: \(error)", underlying: error)
                default:
                    // Apple: on other errors discard the key ID; the next enrollment makes a new key.
                    try? self.storage.delete()
                    throw AttestedClientError(.appAttestFailed, "attestKey failed: \(error)", underlying: error)
                }
            } catch let error as AttestedClientError {
                switch error.code {
                case .storeError, .bodyBudgetExhausted, .rateLimited, .internalError, .transport, .upstreamBusy:
                    failure = error
                case .challengeInvalid:
                    attestation = nil  // a new challenge needs a new attestKey
                    failure = error
                case _ where error.status == 429 || error.status == 503:
                    failure = error
                default:
                    throw error  // app_id_mismatch, nonce_mismatch, ...: not fixed by retrying
                }
            }
            retries += 1
            guard retries < self.retry.maximumAttempts else {
                throw AttestedClientError(
                    .attestationUnavailable,
                    "enrollment gave up after \(retries) attempts: \(failure.message)",
                    status: failure.status,
                    underlying: failure
                )
            }
            let delay = self.retry.delay(
                beforeRetry: retries - 1,
                retryAfter: failure.retryAfter,
                jitter: Double.random(in: 0...1)
            )
            try await self.clock.sleep(for: delay)
        }
    }

    private final class Blocked: @unchecked Sendable {
        // Guarded by `lock`.
        private let lock = NSLock()
        private var stored: (until: Date, error: AttestedClientError)?

        var value: (until: Date, error: AttestedClientError)? {
            get { self.lock.withLock { self.stored } }
            set { self.lock.withLock { self.stored = newValue } }
        }
    }
}
