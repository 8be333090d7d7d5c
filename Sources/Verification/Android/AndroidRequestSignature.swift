/// A signed request from an Android app (docs/protocol.md "Android signed requests"): the
/// attested Keystore key signs, with ECDSA P-256 / SHA-256, the bytes
///
/// ```
/// "attest-gateway-android-v1" || counter (8 bytes, big-endian) || clientDataHash (32 bytes)
/// ```
///
/// where clientDataHash is the iOS one (SHA-256 of `ClientData.canonical`, or of the body under
/// `binding: body`). The `X-App-Assertion` header carries base64(counter (8 bytes) || DER
/// signature). Pure; the counter's freshness is the store's to judge.
package struct AndroidRequestSignature: Sendable, Hashable {
    /// Domain separation: these bytes never start an App Attest nonce or any other signed input.
    package static let versionTag: [UInt8] = Array("attest-gateway-android-v1".utf8)
    /// The largest counter the gateway accepts: the store keeps counters as Redis numbers
    /// (doubles) and the iOS script compares them, so values stay within 32 bits.
    package static let maximumCounter = UInt64(UInt32.max)
    /// A DER ECDSA P-256 signature is at most 72 bytes.
    package static let maximumSignatureSize = 72

    package let counter: UInt32
    package let signature: [UInt8]

    /// Parses the `X-App-Assertion` bytes of an Android key.
    package init(assertion: [UInt8]) throws(AndroidAttestationError) {
        guard assertion.count > 8, assertion.count <= 8 + Self.maximumSignatureSize else {
            throw AndroidAttestationError(
                .requestSignatureMalformed,
                "the assertion of an Android key is 8 counter bytes and a DER signature (9-80 bytes); found \(assertion.count)"
            )
        }
        var value: UInt64 = 0
        for byte in assertion[0..<8] { value = value << 8 | UInt64(byte) }
        guard value >= 1, value <= Self.maximumCounter else {
            throw AndroidAttestationError(
                .requestCounterOutOfRange, "counter \(value) is outside 1...\(Self.maximumCounter)")
        }
        self.counter = UInt32(value)
        self.signature = Array(assertion[8...])
    }

    /// The signed bytes for `counter` and `clientDataHash`.
    package static func signedBytes(counter: UInt64, clientDataHash: [UInt8]) -> [UInt8] {
        var out = Self.versionTag
        out.reserveCapacity(Self.versionTag.count + 8 + clientDataHash.count)
        for shift in stride(from: 56, through: 0, by: -8) {
            out.append(UInt8(truncatingIfNeeded: counter >> UInt64(shift)))
        }
        out += clientDataHash
        return out
    }

    /// Checks the signature under the enrolled key.
    package func verify(clientDataHash: [UInt8], publicKey: ECPublicKey) throws(AndroidAttestationError) {
        let message = Self.signedBytes(counter: UInt64(self.counter), clientDataHash: clientDataHash)
        guard publicKey.isValidSignature(self.signature, for: message) else {
            throw AndroidAttestationError(
                .requestSignatureInvalid,
                "the signature does not verify over \"attest-gateway-android-v1\" || counter || clientDataHash under the enrolled key"
            )
        }
    }
}
