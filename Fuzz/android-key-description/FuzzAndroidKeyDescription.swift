// libFuzzer harness over the Android Key Attestation parsers: the KeyDescription extension
// (the input as the extension value), the chain verifier (the input as the leaf certificate
// above a real chain's intermediates, and alone), and an Android signed request's assertion
// bytes (`AndroidRequestSignature`). Built by Fuzz/android-key-description/run.sh.
import Foundation
import Verification

// A real RKP chain (Pixel 9 GrapheneOS, ATTEST_KEY) and a time inside its validity, read once
// from the vectors folder when present, so mutated leaves meet real issuers.
private let vectorsDirectory =
    ProcessInfo.processInfo.environment["ANDROID_VECTORS_DIR"] ?? "../shared/vectors/android"
private let issuers: [[UInt8]] = {
    let path = vectorsDirectory + "/auditor-pixel9-grapheneos-strongbox-rkp-attestkey-2025/chain.pem"
    guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
    var out: [[UInt8]] = []
    var body: String?
    for line in pem.split(separator: "\n") {
        if line.hasPrefix("-----BEGIN") {
            body = ""
        } else if line.hasPrefix("-----END") {
            if let body, let der = Data(base64Encoded: body) { out.append([UInt8](der)) }
            body = nil
        } else if body != nil {
            body! += line
        }
    }
    return Array(out.dropFirst())
}()
private let fuzzTime = Date(timeIntervalSince1970: 1_762_653_981)  // 2025-11-09T02:06:21Z
private let verifier = try? AndroidAttestationChainVerifier()
private let fuzzHash = [UInt8](repeating: 0x5a, count: 32)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAndroidKeyDescriptionOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))

    if let description = try? AndroidKeyDescription(extensionValue: bytes) {
        // What the parser promises of anything it accepts.
        for list in [description.softwareEnforced, description.hardwareEnforced] {
            precondition(zip(list.tags, list.tags.dropFirst()).allSatisfy { $0 < $1 }, "tags not ascending")
            precondition(list.purposes.count <= 64 && list.digests.count <= 64)
            precondition(Set(list.unknownTags).isSubset(of: Set(list.tags)))
            if let id = list.attestationApplicationID {
                precondition(id.packages.count <= 256 && id.signatureDigests.count <= 64)
                _ = id.packages.map(\.name)
            }
        }
        precondition(description.attestationChallenge.count <= 4096)
        precondition((try? AndroidKeyDescription(extensionValue: bytes)) == description, "not deterministic")
    }
    // The X-App-Assertion of an Android signed request: 8 counter bytes and a DER signature.
    if let signed = try? AndroidRequestSignature(assertion: bytes) {
        precondition(signed.counter >= 1 && bytes.count <= 8 + AndroidRequestSignature.maximumSignatureSize)
        precondition(signed.signature == Array(bytes.dropFirst(8)), "signature bytes moved")
        let message = AndroidRequestSignature.signedBytes(counter: UInt64(signed.counter), clientDataHash: fuzzHash)
        precondition(Array(message[25..<33]) == Array(bytes.prefix(8)), "counter not signed as sent")
    }
    if let verifier {
        _ = try? verifier.verify(chain: [bytes] + issuers, at: fuzzTime, revocationList: .empty)
        _ = try? verifier.verify(chain: [bytes], at: fuzzTime, revocationList: .empty)
    }
    // Keep OpenSSL's thread-local error queue from growing across runs.
    OpenSSLErrorQueue.clear()
    return 0
}
