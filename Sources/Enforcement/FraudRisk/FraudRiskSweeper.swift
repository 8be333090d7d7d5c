import AppleClient
import Foundation
import GatewayIO
import RedisClient
import Synchronization

/// Runs `FraudRiskRefresher.runOnce` every `interval` in the background (`serve` with
/// `apple.fraud_risk.enabled` and a Redis store). One task on Swift's cooperative pool: it
/// awaits the store and Apple's answers, which arrive on the event loops, and sleeps between
/// passes; nothing here runs on (or blocks) a loop. Passes never overlap: the next one starts
/// `interval` after the previous one ended. `stop` cancels the task (a pass in progress ends
/// at its next call) and is idempotent.
package final class FraudRiskSweeper: Sendable {
    package let refresher: FraudRiskRefresher
    package let interval: Duration
    private let task = Mutex<Task<Void, Never>?>(nil)

    package init(refresher: FraudRiskRefresher, interval: Duration) {
        self.refresher = refresher
        self.interval = interval
    }

    /// Keys per pass: what the rate limit lets through in about half the lease's 60 s, so a
    /// pass ends well before its lease would expire under another gateway.
    package var keysPerPass: Int { max(10, self.refresher.configuration.fraudRisk.requestsPerSecond * 30) }

    package func start() {
        let refresher = self.refresher
        let interval = self.interval
        let limit = self.keysPerPass
        let task = Task.detached {
            while !Task.isCancelled {
                switch await refresher.runOnce(limit: limit) {
                case .failure(let error):
                    Log.warning("fraud_risk_pass_failed", [("error", error.kind.rawValue), ("reason", error.reason)])
                case .success(let pass) where !pass.outcomes.isEmpty:
                    let summary = pass.outcomes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                    Log.info("fraud_risk_pass", [("outcomes", summary.joined(separator: ","))])
                case .success:
                    break
                }
                try? await Task.sleep(for: interval)
            }
        }
        let previous = self.task.withLock { current -> Task<Void, Never>? in
            let previous = current
            current = task
            return previous
        }
        previous?.cancel()
    }

    package func stop() {
        let task = self.task.withLock { current -> Task<Void, Never>? in
            let previous = current
            current = nil
            return previous
        }
        task?.cancel()
    }
}
