import Foundation
import Verification

// Measures single-core verification throughput on the real vectors (used by
// scripts/bench-verify.sh / `make bench-verify`; build with -c release).
//
//   verify-bench [--seconds S] [--fixtures DIR] [--only assertions|attestations|attestations-cold]
// prints `assertions_per_second N` and/or `attestations_per_second N` (per second of CPU
// time, as `openssl speed` counts) plus the wall-clock rates. Each loop runs the whole
// public verify call (decode, hashes, signature / chain checks) on one thread.

struct BenchError: Error, CustomStringConvertible {
    var description: String
}

func option(_ name: String, in arguments: [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func loadVector(_ directory: String, _ file: String) throws -> [String: Any] {
    let data = try Data(contentsOf: URL(fileURLWithPath: directory).appendingPathComponent(file))
    guard let root = try JSONSerialization.jsonObject(with: data) as? [String: Any],
        let vectors = root["vectors"] as? [[String: Any]],
        let first = vectors.first(where: { ($0["expected_result"] as? String) == "valid" })
    else { throw BenchError(description: "\(file): no valid vector") }
    return first
}

func field(_ vector: [String: Any], _ key: String) throws -> String {
    guard let value = vector[key] as? String else { throw BenchError(description: "vector has no \(key)") }
    return value
}

func bytes(_ base64: String) throws -> [UInt8] {
    guard let data = Data(base64Encoded: base64) else { throw BenchError(description: "bad base64") }
    return [UInt8](data)
}

/// CPU time consumed by this thread (user + system), in seconds.
func threadCPUSeconds() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

struct Rate {
    /// Operations per second of this thread's CPU time: what `openssl speed` reports by
    /// default (it divides by user CPU time, not wall-clock time), so the two compare on
    /// a shared, loaded machine.
    var perCPUSecond: Double
    /// Operations per wall-clock second (lower when other processes compete for the core).
    var perWallSecond: Double
}

/// Runs `body` in batches until `seconds` of this thread's CPU time are used.
func measure(seconds: Double, _ body: () throws -> Void) rethrows -> Rate {
    for _ in 0..<50 { try body() }  // warm-up
    let clock = ContinuousClock()
    let wallStart = clock.now
    let cpuStart = threadCPUSeconds()
    var count = 0
    while threadCPUSeconds() - cpuStart < seconds {
        for _ in 0..<64 { try body() }
        count += 64
    }
    let cpu = threadCPUSeconds() - cpuStart
    let wall = clock.now - wallStart
    let wallSeconds = Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18
    return Rate(perCPUSecond: Double(count) / cpu, perWallSecond: Double(count) / wallSeconds)
}

func runBench() throws {
    let arguments = Array(CommandLine.arguments.dropFirst())
    let seconds = Double(option("--seconds", in: arguments) ?? "3") ?? 3
    let fixtures = option("--fixtures", in: arguments) ?? "Tests/VerificationTests/Fixtures"

    let assertionVector = try loadVector(fixtures, "assertions.json")
    let assertion = try bytes(try field(assertionVector, "assertion"))
    let clientDataHash = SHA256.hash(try bytes(try field(assertionVector, "client_data")))
    let key = try ECPublicKey(pem: try field(assertionVector, "public_key"))  // parsed once, as the gateway caches it
    let appIDs = [AppID(try field(assertionVector, "app_id"))]
    let assertionVerifier = AssertionVerifier()
    _ = try assertionVerifier.verify(
        assertionObject: assertion, clientDataHash: clientDataHash, publicKey: key,
        appIDs: appIDs, previousCounter: 0)

    let attestationVector = try loadVector(fixtures, "attestations.json")
    let attestation = try bytes(try field(attestationVector, "attestation"))
    let keyID = try bytes(try field(attestationVector, "key_id"))
    let attestationHash = try bytes(try field(attestationVector, "client_data_hash"))
    guard let time = ISO8601DateFormatter().date(from: try field(attestationVector, "valid_at")) else {
        throw BenchError(description: "bad valid_at")
    }
    let attestationVerifier = try AttestationVerifier(
        appIDs: [try field(attestationVector, "app_id")], environment: .any)
    _ = try attestationVerifier.verify(
        attestationObject: attestation, keyID: keyID, clientDataHash: attestationHash, at: time)

    let only = option("--only", in: arguments)
    if only == nil || only == "assertions" {
        let assertionsPerSecond = try measure(seconds: seconds) {
            _ = try assertionVerifier.verify(
                assertionObject: assertion, clientDataHash: clientDataHash, publicKey: key,
                appIDs: appIDs, previousCounter: 0)
        }
        print("assertions_per_second \(Int(assertionsPerSecond.perCPUSecond))")
        print("assertions_per_wall_second \(Int(assertionsPerSecond.perWallSecond))")
    }
    if only == "attestations-cold" {
        // A fresh verifier per call: the full chain (two P-384 checks) every time, plus
        // parsing the pinned root and building the store.
        let appID = try field(attestationVector, "app_id")
        let coldPerSecond = try measure(seconds: seconds) {
            let verifier = try AttestationVerifier(appIDs: [appID], environment: .any)
            _ = try verifier.verify(
                attestationObject: attestation, keyID: keyID, clientDataHash: attestationHash, at: time)
        }
        print("attestations_cold_per_second \(Int(coldPerSecond.perCPUSecond))")
    }
    if only == nil || only == "attestations" {
        let attestationsPerSecond = try measure(seconds: seconds) {
            _ = try attestationVerifier.verify(
                attestationObject: attestation, keyID: keyID, clientDataHash: attestationHash, at: time)
        }
        print("attestations_per_second \(Int(attestationsPerSecond.perCPUSecond))")
        print("attestations_per_wall_second \(Int(attestationsPerSecond.perWallSecond))")
    }
}

do {
    try runBench()
} catch {
    FileHandle.standardError.write(Data("verify-bench: \(error)\n".utf8))
    exit(1)
}
