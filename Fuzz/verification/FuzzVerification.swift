// libFuzzer harness over the Verification decoders: CBOR, launch validation entries,
// authenticator data (both contexts), the nonce extension DER, attestation and assertion
// objects, and the full verifiers (fixed time and inputs, so runs reproduce). Built by Fuzz/verification/run.sh
// together with the Verification sources into one module.
import Foundation
import Verification

// Inside the validity of real vector att-10 (2024-02-07T09:08:56Z) with its key ID and
// clientDataHash, so mutations of that object get past the chain (and through the
// intermediate cache) to the later checks.
private let fuzzTime = Date(timeIntervalSince1970: 1_707_296_936)
private let fuzzKeyID = [UInt8](Data(base64Encoded: "SC86LZmoFbL/KxWfezr7ihgEdLHK8ZrDbTwMtAkBCbM=") ?? Data())
private let fuzzClientDataHash = [UInt8](Data(base64Encoded: "Pp71C3/w+YUwT3tmCJXEwtoDTkPa+zhbcVKJjSJsADc=") ?? Data())
private let fuzzVerifier: AttestationVerifier? = try? AttestationVerifier(
    appIDs: ["V8H6LQ9448.io.uebelacker.AppAttestExample", "ABCDE12345.com.example.app"], environment: .any)
private let fuzzKey: ECPublicKey? = try? ECPublicKey(
    x962: Array(
        Data(base64Encoded: "BLqK+9/4UD0ZwmKwKtnRtFQjVrmTPv8Upbby6NIFm1X/jm7mnsOI/OTgfugeMAs3EhSb0ErTVjLUZGxXn5pADQs=")
            ?? Data())
)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzVerificationOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))

    if let value = try? CBORDecoder().decode(bytes) {
        _ = value.kindName
        // The iOS 27 launch validation entries of an extensions map: a decoded category is
        // exactly the 4 little-endian bytes it came from; a version is printable ASCII.
        if let launch = try? LaunchValidation(extensions: value) {
            if let category = launch.category {
                precondition(
                    value[textKey: LaunchValidation.categoryKey]?.byteStringValue
                        == LaunchValidation.categoryBytes(category))
            }
            if let version = launch.bundleVersion {
                precondition(version.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F })
            }
        }
    }
    _ = try? CBORDecoder(limits: .init(maxDepth: 4, maxInputBytes: 512, maxContainerCount: 8)).decodePrefix(
        bytes, from: 0)
    _ = try? AuthenticatorData(bytes, context: .attestation)
    _ = try? AuthenticatorData(bytes, context: .assertion)
    _ = NonceExtension.nonce(fromExtensionValue: bytes)
    _ = KeyAccessPolicy(extensionValue: bytes)
    _ = try? AttestationObject(bytes)
    _ = try? AssertionObject(bytes)
    if let verifier = fuzzVerifier {
        _ = try? verifier.verify(
            attestationObject: bytes, keyID: fuzzKeyID, clientDataHash: fuzzClientDataHash, at: fuzzTime)
    }
    if let key = fuzzKey {
        _ = try? AssertionVerifier().verify(
            assertionObject: bytes, clientDataHash: [UInt8](repeating: 7, count: 32),
            publicKey: key, appIDs: [AppID("ABCDE12345.com.example.app")], previousCounter: 0)
        _ = key.isValidSignature(bytes, for: [1, 2, 3])
    }
    _ = try? ECPublicKey(x962: bytes)
    // Keep OpenSSL's thread-local error queue from growing across runs.
    OpenSSLErrorQueue.clear()
    return 0
}
