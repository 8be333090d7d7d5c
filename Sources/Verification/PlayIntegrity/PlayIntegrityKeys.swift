import Foundation

/// One of the app's AES-256 response-decryption keys from Play Console, with the name the
/// policy gives it (a `kid`-like label: Google's tokens carry none, so the verifier tries each
/// key in order and reports the name of the one that worked).
public struct PlayIntegrityDecryptionKey: Sendable {
    public let name: String
    /// The 32 raw key bytes.
    let bytes: [UInt8]

    public init(name: String, bytes: [UInt8]) throws(PlayIntegrityError) {
        guard bytes.count == 32 else {
            throw PlayIntegrityError(
                .invalidKey,
                "decryption key \(PlayIntegrityError.printable(name)) is \(bytes.count) bytes, not 32 (AES-256)")
        }
        self.name = name
        self.bytes = bytes
    }

    /// The key as Play Console shows it: standard base64 of the 32 bytes (whitespace around it
    /// is ignored, as in a file with a final newline).
    public init(name: String, base64 text: String) throws(PlayIntegrityError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.utf8.count <= 64, let data = Data(base64Encoded: trimmed) else {
            throw PlayIntegrityError(
                .invalidKey, "decryption key \(PlayIntegrityError.printable(name)) is not standard base64")
        }
        try self.init(name: name, bytes: [UInt8](data))
    }
}

/// One of the app's EC P-256 response-verification keys from Play Console, with its name.
public struct PlayIntegrityVerificationKey: Sendable {
    public let name: String
    public let key: ECPublicKey

    public init(name: String, key: ECPublicKey) {
        self.name = name
        self.key = key
    }

    /// The key as Play Console shows it: standard base64 of the DER SubjectPublicKeyInfo.
    /// A PEM `PUBLIC KEY` block is accepted too.
    public init(name: String, base64SPKI text: String) throws(PlayIntegrityError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        let pem: String
        if trimmed.hasPrefix("-----BEGIN PUBLIC KEY-----") {
            pem = trimmed + "\n"
        } else {
            guard trimmed.utf8.count <= 1024, let data = Data(base64Encoded: trimmed) else {
                throw PlayIntegrityError(
                    .invalidKey, "verification key \(PlayIntegrityError.printable(name)) is not standard base64 or PEM")
            }
            pem =
                "-----BEGIN PUBLIC KEY-----\n" + data.base64EncodedString(options: [.lineLength64Characters])
                + "\n-----END PUBLIC KEY-----\n"
        }
        do {
            self.init(name: name, key: try ECPublicKey(pem: pem))
        } catch {
            throw PlayIntegrityError(
                .invalidKey,
                "verification key \(PlayIntegrityError.printable(name)) is not a P-256 public key: \(error.reason)")
        }
    }
}
