// libFuzzer harness over the Play Integrity classic-token reader: PlayIntegrityJWE (size cap,
// five parts, strict base64url, the header's alg/enc/zip/crit, part lengths) and its decryption
// through cjose, PlayIntegrityJWS (three parts, ES256 only, r ‖ s), PlayIntegrityPayload (Google's
// verdict JSON) and the policy checks on whatever payload decodes. Invariants: decoded parts
// re-encode to the input's parts, a decoded payload survives an encode/decode round trip, and
// no input ever verifies under a key whose private half nobody holds (the public key of a real
// App Attest vector), so no input passes the verifier. The standard-token side is fed the same
// bytes: Google's decodeIntegrityToken answer (PlayIntegrityStandardAnswer, then the same policy
// checks), the token endpoint's answer (GoogleAccessToken: a decoded token is printable and its
// lifetime in range) and a service-account key file (GoogleServiceAccount: JSON, then OpenSSL's
// PEM reader; nothing the fuzzer writes is a usable RSA key, and if it were its signature must
// verify).
import Foundation
import Verification

private let decryptionKey = try? PlayIntegrityDecryptionKey(
    name: "fuzz", bytes: Array(0..<32).map { UInt8($0) &* 7 &+ 3 })
private let verificationKey: PlayIntegrityVerificationKey? =
    (try? ECPublicKey(
        x962: Array(
            Data(
                base64Encoded:
                    "BLqK+9/4UD0ZwmKwKtnRtFQjVrmTPv8Upbby6NIFm1X/jm7mnsOI/OTgfugeMAs3EhSb0ErTVjLUZGxXn5pADQs=")
                ?? Data())
    )).map { PlayIntegrityVerificationKey(name: "fuzz", key: $0) }
private let digest = [UInt8](repeating: 0xAB, count: 32)
private let verifier = PlayIntegrityVerifier(
    decryptionKeys: decryptionKey.map { [$0] } ?? [], verificationKeys: verificationKey.map { [$0] } ?? [],
    policy: PlayIntegrityPolicy(
        packageName: "com.example.app", certificateDigests: [digest], requireLicensed: true,
        maximumDeviceActivityLevel: 2))

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPlayIntegrityOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))

    if let token = try? PlayIntegrityJWE(utf8: bytes) {
        precondition(bytes.count <= PlayIntegrityJWE.maximumBytes)
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        precondition(parts.count == 5)
        precondition(Array(Base64URL.encode(token.ciphertext).utf8) == Array(parts[3]))
        precondition(token.tag.count == 16 && token.initializationVector.count == 12 && token.encryptedKey.count == 40)
        // Only the committed seed (a real token under the harness's AES key) opens; its inner
        // JWS is then held to the same invariants as any other.
        if let opened = try? token.decrypt(with: decryptionKey.map { [$0] } ?? []),
            let jws = try? PlayIntegrityJWS(utf8: opened.plaintext)
        {
            let index = try? jws.verify(with: verificationKey.map { [$0] } ?? [])
            precondition(index == nil, "a JWS verified under a key nobody can sign with")
        }
    }
    if let jws = try? PlayIntegrityJWS(utf8: bytes) {
        precondition(bytes.starts(with: jws.signingInput), "the signing input is not the JWS's prefix")
        precondition(jws.signature.count == 64)
        let index = try? jws.verify(with: verificationKey.map { [$0] } ?? [])
        precondition(index == nil, "a JWS verified under a key nobody can sign with")
    }
    let verdict = try? verifier.verify(token: String(decoding: bytes, as: UTF8.self), expectedNonce: "n", nowMillis: 0)
    precondition(verdict == nil, "a fuzzed token passed the verifier")
    if let payload = try? PlayIntegrityPayload.decode(bytes) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        if let encoded = try? encoder.encode(payload) {
            let again = try? PlayIntegrityPayload.decode([UInt8](encoded))
            precondition(again == payload, "a verdict did not survive an encode/decode round trip")
        }
        for binding in [PlayIntegrityBinding.nonce("n"), .requestHash("h")] {
            _ = try? verifier.check(payload, binding: binding, nowMillis: payload.requestDetails.timestampMillis)
        }
    }
    if let payload = try? PlayIntegrityStandardAnswer.payload(bytes) {
        for binding in [PlayIntegrityBinding.nonce("n"), .requestHash("h")] {
            _ = try? verifier.verifyStandard(
                payload: payload, binding: binding, nowMillis: payload.requestDetails.timestampMillis)
        }
    }
    if let token = try? GoogleAccessToken.decode(bytes) {
        precondition((1...4096).contains(token.value.utf8.count))
        precondition(token.value.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "an access token that is not printable")
        precondition((1...86_400).contains(token.expiresIn))
    }
    if let account = try? GoogleServiceAccount(json: bytes) {
        precondition(bytes.count <= GoogleServiceAccount.maximumFileBytes)
        precondition(account.clientEmail.contains("@") && account.tokenURI.hasPrefix("https://"))
        _ = try? account.signRS256([1, 2, 3])
    }
    OpenSSLErrorQueue.clear()
    return 0
}
