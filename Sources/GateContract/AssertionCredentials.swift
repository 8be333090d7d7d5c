/// The credential headers of a protected request (`X-App-Attest-Key-Id`, `X-App-Assertion`),
/// decoded by the gate in `classify`, before any body byte is read, and carried to `decide`
/// in the classification.
package struct AssertionCredentials: Sendable {
    /// Standard base64 of the 32-byte key ID, re-encoded (one spelling per key).
    package var keyID: String
    package var assertion: [UInt8]

    package init(keyID: String, assertion: [UInt8]) {
        self.keyID = keyID
        self.assertion = assertion
    }
}
