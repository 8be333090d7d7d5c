import Foundation
import Verification

// Measures single-core verification throughput on the real vectors (used by
// scripts/bench-verify.sh / `make bench-verify`; build with -c release).
//
//   verify-bench [--seconds S] [--fixtures DIR]
// prints `assertions_per_second N` and `attestations_per_second N`.

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

/// Runs `body` in batches until `seconds` elapse; returns operations per second.
func measure(seconds: Double, _ body: () throws -> Void) rethrows -> Double {
    // Warm-up.
    for _ in 0..<50 { try body() }
    let clock = ContinuousClock()
    let start = clock.now
    let deadline = start + .milliseconds(Int64(seconds * 1000))
    var count = 0
    while clock.now < deadline {
        for _ in 0..<64 { try body() }
        count += 64
    }
    let elapsed = clock.now - start
    let elapsedSeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return Double(count) / elapsedSeconds
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
    _ = try assertionVerifier.verify(assertionObject: assertion, clientDataHash: clientDataHash, publicKey: key,
                                     appIDs: appIDs, previousCounter: 0)

    let attestationVector = try loadVector(fixtures, "attestations.json")
    let attestation = try bytes(try field(attestationVector, "attestation"))
    let keyID = try bytes(try field(attestationVector, "key_id"))
    let attestationHash = try bytes(try field(attestationVector, "client_data_hash"))
    guard let time = ISO8601DateFormatter().date(from: try field(attestationVector, "valid_at")) else {
        throw BenchError(description: "bad valid_at")
    }
    let attestationVerifier = try AttestationVerifier(appIDs: [try field(attestationVector, "app_id")], environment: .any)
    _ = try attestationVerifier.verify(attestationObject: attestation, keyID: keyID, clientDataHash: attestationHash, at: time)

    if arguments.contains("--components") {
        let object = try AssertionObject(assertion)
        let nonce = SHA256.hash(object.authenticatorData.rawValue + clientDataHash)
        print("signature_only_per_second \(Int(measure(seconds: seconds) { _ = key.isValidSignature(object.signature, for: nonce) }))")
        let raw = object.authenticatorData.rawValue
        print("sha256_two_part_per_second \(Int(measure(seconds: seconds) { _ = SHA256.hash(raw, clientDataHash) }))")
        print("sha256_one_shot_per_second \(Int(measure(seconds: seconds) { _ = SHA256.hash(raw + clientDataHash) }))")
        print("decode_only_per_second \(Int(try measure(seconds: seconds) { _ = try AssertionObject(assertion) }))")
    }
    let assertionsPerSecond = try measure(seconds: seconds) {
        _ = try assertionVerifier.verify(assertionObject: assertion, clientDataHash: clientDataHash, publicKey: key,
                                         appIDs: appIDs, previousCounter: 0)
    }
    print("assertions_per_second \(Int(assertionsPerSecond))")
    let attestationsPerSecond = try measure(seconds: seconds) {
        _ = try attestationVerifier.verify(attestationObject: attestation, keyID: keyID, clientDataHash: attestationHash, at: time)
    }
    print("attestations_per_second \(Int(attestationsPerSecond))")
}

do {
    try runBench()
} catch {
    FileHandle.standardError.write(Data("verify-bench: \(error)\n".utf8))
    exit(1)
}
