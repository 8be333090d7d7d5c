package import AppleClient
package import Foundation
package import GatewayIO
package import KeyStore
package import OutboundHTTP
package import RedisClient
package import Verification

/// The background refresher of fraud-risk receipts: one pass claims the Redis lease (so one
/// gateway of N works the due set at a time), reads the due keys, and for each one posts its
/// current receipt to Apple, verifies a new receipt (`ReceiptVerifier`: Apple's root, the
/// key's public key, its App ID), feeds the outcome to `FraudRiskRefresh` and saves state,
/// receipt and metric (`RedisStore+FraudRisk`). Calls are spaced by the configured
/// `requests_per_second`; a 401 halts the pass (every key would get the same answer).
package final class FraudRiskRefresher: Sendable {
    /// What one pass did.
    package struct Pass: Sendable, Hashable {
        /// False when another gateway holds the lease (nothing was done).
        package var heldLease = false
        /// Outcome code (`refreshed`, `not_modified`, `no_data`, an error code) → count.
        package var outcomes: [String: Int] = [:]
    }

    package let store: any FraudRiskStore
    package let client: OutboundHTTPClient
    package let configuration: AppleConfiguration
    private let verifier: ReceiptVerifier
    /// This gateway's lease holder name.
    package let owner: String
    private let metrics: FraudRiskRefreshMetrics

    package init(
        store: any FraudRiskStore, client: OutboundHTTPClient, configuration: AppleConfiguration,
        verifier: ReceiptVerifier,
        registry: MetricsRegistry, owner: String = UUID().uuidString
    ) {
        self.store = store
        self.client = client
        self.configuration = configuration
        self.verifier = verifier
        self.owner = owner
        self.metrics = FraudRiskRefreshMetrics(registry: registry)
    }

    /// One pass over at most `limit` due keys at `now`. `jitter` gives the state machine its
    /// random share (tests pass a constant).
    package func runOnce(
        now: Date = Date(), limit: Int = 100, leaseTTL: Duration = .seconds(60),
        jitter: @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) async -> Result<Pass, StoreError> {
        var pass = Pass()
        let store = self.store
        let owner = self.owner
        let claimed = await withCheckedContinuation { continuation in
            store.claimFraudRiskLease(owner: owner, ttl: leaseTTL) { continuation.resume(returning: $0) }
        }
        switch claimed {
        case .failure(let error): return .failure(error)
        case .success(false): return .success(pass)
        case .success(true): pass.heldLease = true
        }
        let result = await self.work(pass, now: now, limit: limit, jitter: jitter)
        _ = await withCheckedContinuation { continuation in
            store.releaseFraudRiskLease(owner: owner) { continuation.resume(returning: $0) }
        }
        return result
    }

    /// The pass's work while the lease is held.
    private func work(
        _ pass: Pass, now: Date, limit: Int, jitter: @Sendable () -> Double
    ) async -> Result<Pass, StoreError> {
        var pass = pass
        let store = self.store
        let due = await withCheckedContinuation { continuation in
            store.dueFraudRiskKeys(now: now, limit: limit) { continuation.resume(returning: $0) }
        }
        guard case .success(let keyIDs) = due else { return due.map { _ in pass } }
        let spacing = Duration.seconds(1) / max(1, self.configuration.fraudRisk.requestsPerSecond)
        for (index, keyID) in keyIDs.enumerated() {
            if index > 0 { try? await Task.sleep(for: spacing) }
            // A stopped sweeper (drain, reload): leave the rest due for the next holder.
            if Task.isCancelled { return .success(pass) }
            let outcome = await self.refresh(keyID: keyID, now: now, jitter: jitter())
            switch outcome {
            case .failure(let error): return .failure(error)
            case .success(let code):
                pass.outcomes[code, default: 0] += 1
                self.metrics.refreshed(outcome: code)
                if code == AppleError.Code.unauthorized.description { return .success(pass) }
            }
        }
        return .success(pass)
    }

    /// Refreshes one key; returns the outcome code saved in its state.
    private func refresh(keyID: String, now: Date, jitter: Double) async -> Result<String, StoreError> {
        let store = self.store
        let fetched = await withCheckedContinuation { continuation in
            store.fetchKey(keyID: keyID) { continuation.resume(returning: $0) }
        }
        guard case .success(let found) = fetched else { return fetched.map { _ in "" } }
        guard let record = found, record.status == .active else {
            // Revoked or gone: out of the due set.
            var halted = FraudRiskRefresh(attestedAt: now)
            _ = halted.handle(.failed(AppleError(.unauthorized, "key gone"), retryAfter: nil), at: now, jitter: 0)
            await self.save(keyID: keyID, state: halted, receipt: nil)
            return .success("key_inactive")
        }
        let stored = await withCheckedContinuation { continuation in
            store.fetchFraudRisk(keyID: keyID) { continuation.resume(returning: $0) }
        }
        guard case .success(let existing) = stored else { return stored.map { _ in "" } }
        var state = existing ?? FraudRiskRefresh(attestedAt: record.attestedAt)
        let environment: AppleEnvironment = record.environment == "production" ? .production : .development
        let event: FraudRiskEvent
        do throws(AppleError) {
            let request = try FraudRiskRequest.make(
                receipt: record.receipt, environment: environment, override: self.configuration.attestDataOverride)
            let response = try await self.client.send(request, timeout: self.configuration.fraudRisk.timeout)
                .mapError { AppleError($0) }.get()
            do {
                switch try FraudRiskAnswer.decode(status: response.status, body: response.body) {
                case .notModified: event = .notModified
                case .noData: event = .noData
                case .receipt(let receipt):
                    do {
                        let payload = try self.verifier.verify(
                            receipt: receipt, appID: record.appID, publicKey: record.publicKey, at: now)
                        event = .refreshed(receipt: receipt, payload: payload)
                    } catch {
                        event = .receiptRejected(error)
                    }
                }
            } catch {
                event = .failed(error, retryAfter: response.retryAfter)
            }
        } catch {
            event = .failed(error, retryAfter: nil)
        }
        let action = state.handle(event, at: now, policy: self.configuration.fraudRisk.refresh, jitter: jitter)
        var newReceipt: [UInt8]?
        if case .storeReceipt(let receipt, _) = action {
            newReceipt = receipt
            if let metric = state.riskMetric { self.metrics.riskMetric(metric) }
        }
        await self.save(keyID: keyID, state: state, receipt: newReceipt)
        return .success(state.lastOutcome ?? "unknown")
    }

    private func save(keyID: String, state: FraudRiskRefresh, receipt: [UInt8]?) async {
        let store = self.store
        _ = await withCheckedContinuation { continuation in
            store.saveFraudRisk(keyID: keyID, state: state, receipt: receipt, schedule: true) {
                continuation.resume(returning: $0)
            }
        }
    }
}
