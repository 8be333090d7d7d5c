import AppAttestClient
import Foundation

/// `AppAttestService` backed by the gateway's development simulator (`attest-gateway sim`):
/// real App Attest objects in Apple's format under the simulator's test CA, with a per-key
/// counter kept in the simulator directory (as the Secure Enclave keeps it).
///
/// - `generateKey`: `sim attest` creates a simulated device key (its attestation is dropped:
///   `generateKey` does not talk to Apple).
/// - `attestKey`: `sim attest --key-id` attests that key over `clientDataHash`.
/// - `generateAssertion`: `sim assert` with the key's next counter.
///
/// Counts every call, and can fail `attestKey` on purpose (an app killed mid-enrollment,
/// Apple unavailable).
final class SimulatorAppAttestService: AppAttestService, @unchecked Sendable {
    let binary: String
    let directory: String
    let appID: String
    let isSupported: Bool

    // Guarded by `lock`.
    private let lock = NSLock()
    private var counts: [String: Int] = [:]
    private var attestFailures: [any Error] = []
    private var invalidKeys: Set<String> = []
    private var assertionDelays: [Duration] = []

    init(binary: String, directory: String, appID: String, isSupported: Bool) {
        self.binary = binary
        self.directory = directory
        self.appID = appID
        self.isSupported = isSupported
    }

    func calls(_ name: String) -> Int { self.lock.withLock { self.counts[name, default: 0] } }

    /// The next `attestKey` calls throw these, in order, without attesting.
    func failNextAttestations(_ errors: [any Error]) { self.lock.withLock { self.attestFailures += errors } }

    /// `generateAssertion` for this key throws `invalidKey` from now on (a key lost in a restore).
    func invalidate(_ keyID: String) { self.lock.withLock { _ = self.invalidKeys.insert(keyID) } }

    /// The next `generateAssertion` calls take this much longer, in order (a slow device).
    func delayNextAssertions(_ delays: [Duration]) { self.lock.withLock { self.assertionDelays += delays } }

    private func count(_ name: String) { self.lock.withLock { self.counts[name, default: 0] += 1 } }

    func generateKey() async throws -> String {
        self.count("generateKey")
        let object = try await self.sim([
            "attest", "--dir", self.directory, "--app-id", self.appID, "--client-data-hash",
            Data(repeating: 0, count: 32).base64EncodedString(),
        ])
        guard let keyID = object["key_id"] as? String else { throw TestError("sim attest printed no key_id") }
        return keyID
    }

    func attestKey(_ keyID: String, clientDataHash: Data) async throws -> Data {
        self.count("attestKey")
        let failure: (any Error)? = self.lock.withLock {
            self.attestFailures.isEmpty ? nil : self.attestFailures.removeFirst()
        }
        if let failure { throw failure }
        let object = try await self.sim([
            "attest", "--dir", self.directory, "--app-id", self.appID, "--key-id", keyID, "--client-data-hash",
            clientDataHash.base64EncodedString(),
        ])
        guard let text = object["attestation"] as? String, let data = Data(base64Encoded: text) else {
            throw TestError("sim attest printed no attestation")
        }
        return data
    }

    func generateAssertion(_ keyID: String, clientDataHash: Data) async throws -> Data {
        self.count("generateAssertion")
        if self.lock.withLock({ self.invalidKeys.contains(keyID) }) {
            throw AppAttestServiceError(.invalidKey, "simulated: key lost")
        }
        let delay: Duration? = self.lock.withLock {
            self.assertionDelays.isEmpty ? nil : self.assertionDelays.removeFirst()
        }
        if let delay { try await Task.sleep(for: delay) }
        let object = try await self.sim([
            "assert", "--dir", self.directory, "--key-id", keyID, "--app-id", self.appID, "--client-data-hash",
            clientDataHash.base64EncodedString(),
        ])
        guard let text = object["assertion"] as? String, let data = Data(base64Encoded: text) else {
            throw TestError("sim assert printed no assertion")
        }
        return data
    }

    private func sim(_ arguments: [String]) async throws -> [String: Any] {
        let result = try await run(self.binary, ["sim"] + arguments)
        guard result.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        else { throw TestError("sim \(arguments.first ?? ""): exit \(result.status): \(result.stderr)") }
        return object
    }
}

/// `AttestClock` that sleeps for real and records every sleep (backoff happened, and how long).
final class RecordingClock: AttestClock, @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [Duration] = []

    var sleeps: [Duration] { self.lock.withLock { self.recorded } }

    func now() -> Date { Date() }

    func sleep(for duration: Duration) async throws {
        self.lock.withLock { self.recorded.append(duration) }
        try await Task.sleep(for: duration)
    }
}
