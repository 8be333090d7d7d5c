// libFuzzer harness over the attestation token decoder: CompactJWS (size cap, three parts,
// strict base64url, the JOSE header), the claims decoder, and TokenVerifier under a key whose
// private half nobody holds (the public key of a real App Attest vector). Invariants: a decoded
// part re-encodes to the bytes it came from, the signing input is the input's prefix, and no
// input ever verifies.
import Foundation
import Verification

private let fuzzKey: ECPublicKey? = try? ECPublicKey(
    x962: Array(
        Data(base64Encoded: "BLqK+9/4UD0ZwmKwKtnRtFQjVrmTPv8Upbby6NIFm1X/jm7mnsOI/OTgfugeMAs3EhSb0ErTVjLUZGxXn5pADQs=")
            ?? Data())
)
private let fuzzVerifier = TokenVerifier(
    issuer: "https://attest.example.com", keys: fuzzKey.map { ["k1": $0] } ?? [:], clockSkewSeconds: 30,
    maximumLifetimeSeconds: 3600)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJWTOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))

    if let decoded = Base64URL.decode(bytes) {
        precondition(Array(Base64URL.encode(decoded).utf8) == bytes, "base64url decoded a non-canonical spelling")
    }
    if let token = try? CompactJWS(utf8: bytes) {
        precondition(bytes.count <= CompactJWS.maximumBytes)
        precondition(bytes.starts(with: token.signingInput), "the signing input is not the token's prefix")
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        precondition(parts.count == 3)
        precondition(Array(Base64URL.encode(token.payload).utf8) == Array(parts[1]))
        precondition(Array(Base64URL.encode(token.signature).utf8) == Array(parts[2]))
        _ = try? token.claims()
        let verified = try? fuzzVerifier.verify(token, audience: "orders", now: 1_800_000_000)
        precondition(verified == nil, "a token verified under a key nobody can sign with")
    }
    OpenSSLErrorQueue.clear()
    return 0
}
