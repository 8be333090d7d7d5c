import Foundation

/// A Play Integrity classic token as it arrives: a JWE in compact serialization (RFC 7516 §7.1,
/// `header.encryptedKey.iv.ciphertext.tag`), split, decoded and checked, not yet decrypted.
///
/// Bounded and strict before any cryptography: at most `maximumBytes` of text, exactly five
/// parts, each strict unpadded base64url (`Base64URL`), the header a JSON object whose `alg` is
/// exactly `A256KW` and `enc` exactly `A256GCM`, with no `zip` and no `crit`; the wrapped key
/// 40 bytes (RFC 3394 of a 32-byte key), the IV 12 bytes and the tag 16 bytes (RFC 7518 §5.3),
/// so a truncated tag never reaches the AES-GCM code.
public struct PlayIntegrityJWE: Sendable, Hashable {
    /// Largest token text accepted. Google's classic tokens are 1–3 KiB; 16 KiB leaves room
    /// for long digest lists and keeps a hostile token cheap to refuse.
    public static let maximumBytes = 16 * 1024
    public static let keyWrapAlgorithm = "A256KW"
    public static let contentEncryption = "A256GCM"

    /// The whole compact text (ASCII), as cjose imports it.
    public let compact: [UInt8]
    public let encryptedKey: [UInt8]
    public let initializationVector: [UInt8]
    public let ciphertext: [UInt8]
    public let tag: [UInt8]

    public init(_ text: some StringProtocol) throws(PlayIntegrityError) {
        try self.init(utf8: Array(text.utf8))
    }

    public init(utf8 bytes: [UInt8]) throws(PlayIntegrityError) {
        let parts: [ArraySlice<UInt8>]
        do throws(JOSECompact.SplitFailure) {
            parts = try JOSECompact.split(bytes, count: 5, maximumBytes: Self.maximumBytes)
        } catch {
            switch error {
            case .tooLong:
                throw PlayIntegrityError(.badFormat, "token of \(bytes.count) bytes exceeds \(Self.maximumBytes)")
            case .partCount(let found):
                throw PlayIntegrityError(.badFormat, "a compact JWE has five parts separated by '.', found \(found)")
            }
        }
        let names = ["protected header", "encrypted key", "initialization vector", "ciphertext", "authentication tag"]
        var decoded: [[UInt8]] = []
        decoded.reserveCapacity(5)
        for (index, part) in parts.enumerated() {
            guard let value = JOSECompact.nonEmptyPart(part) else {
                throw PlayIntegrityError(.badFormat, "the JWE's \(names[index]) is empty or not unpadded base64url")
            }
            decoded.append(value)
        }
        try Self.checkHeader(decoded[0])
        guard decoded[1].count == 40 else {
            throw PlayIntegrityError(
                .badFormat, "the JWE's encrypted key is \(decoded[1].count) bytes; A256KW wraps 32 into 40")
        }
        guard decoded[2].count == 12 else {
            throw PlayIntegrityError(
                .badFormat, "the JWE's initialization vector is \(decoded[2].count) bytes; A256GCM uses 12")
        }
        guard decoded[4].count == 16 else {
            throw PlayIntegrityError(
                .badFormat, "the JWE's authentication tag is \(decoded[4].count) bytes; A256GCM uses 16")
        }
        self.compact = bytes
        self.encryptedKey = decoded[1]
        self.initializationVector = decoded[2]
        self.ciphertext = decoded[3]
        self.tag = decoded[4]
    }

    private struct Header: Decodable {
        var alg: String
        var enc: String
        var zip: String?
        var crit: [String]?
    }

    private static func checkHeader(_ bytes: [UInt8]) throws(PlayIntegrityError) {
        let header: Header
        do throws(JOSECompact.ObjectFailure) {
            header = try JOSECompact.object(Header.self, from: bytes)
        } catch {
            switch error {
            case .notAnObject:
                throw PlayIntegrityError(.badFormat, "the JWE's protected header is not a JSON object")
            case .criticalExtensions, .notTheExpectedObject:
                throw PlayIntegrityError(
                    .badFormat, "the JWE's protected header is not a JSON object with string alg and enc")
            }
        }
        guard header.alg == Self.keyWrapAlgorithm else {
            throw PlayIntegrityError(
                .unsupportedAlgorithm,
                "JWE alg \(PlayIntegrityError.printable(header.alg)) is refused; Play Integrity uses A256KW")
        }
        guard header.enc == Self.contentEncryption else {
            throw PlayIntegrityError(
                .unsupportedAlgorithm,
                "JWE enc \(PlayIntegrityError.printable(header.enc)) is refused; Play Integrity uses A256GCM")
        }
        guard header.zip == nil else {
            throw PlayIntegrityError(.unsupportedAlgorithm, "the JWE header asks for compression (zip)")
        }
        guard header.crit == nil else {
            throw PlayIntegrityError(.unsupportedAlgorithm, "the JWE header lists critical extensions (crit)")
        }
    }

    /// The plaintext under the first of `keys` that decrypts, and that key's index.
    public func decrypt(with keys: [PlayIntegrityDecryptionKey]) throws(PlayIntegrityError) -> (
        plaintext: [UInt8], keyIndex: Int
    ) {
        guard !keys.isEmpty else {
            throw PlayIntegrityError(.decryptionFailed, "no decryption key is configured")
        }
        for (index, key) in keys.enumerated() {
            if let plaintext = JOSEDecryption.decryptA256KWA256GCM(compact: self.compact, key: key.bytes) {
                return (plaintext, index)
            }
        }
        throw PlayIntegrityError(
            .decryptionFailed,
            "none of the \(keys.count) decryption key(s) (\(keys.map { PlayIntegrityError.printable($0.name) }.joined(separator: ", "))) unwraps and authenticates the token"
        )
    }
}
