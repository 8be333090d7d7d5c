import Foundation
package import Verification

/// One key of `identity_signature.keys`, loaded from its `key_file`.
///
/// - `hmac-sha256`: the file's bytes without surrounding ASCII whitespace (so
///   `openssl rand -base64 32 > key` and an editor's trailing newline both work), at least 32
///   bytes. The upstream reads the same file the same way.
/// - `es256`: an unencrypted PKCS#8 P-256 private key PEM (`openssl genpkey -algorithm EC
///   -pkeyopt ec_paramgen_curve:P-256`); the upstream holds only its public key.
///
/// Secrets never appear in a message: problems name the path and what was wrong.
package enum IdentitySigningKey: Sendable {
    case hmacSHA256([UInt8])
    case es256(ECPrivateKey)

    /// Shortest HMAC secret accepted: 256 bits, the hash's own size (RFC 2104 §3).
    package static let minimumSecretBytes = 32
    /// Largest key file read (a PEM key is about 250 bytes).
    package static let maximumFileBytes = 16 * 1024

    package var algorithm: IdentitySignatureAlgorithm {
        switch self {
        case .hmacSHA256: .hmacSHA256
        case .es256: .es256
        }
    }

    /// Why a key cannot sign; `code` is stable (it ends up in `policy error` output and logs).
    package enum Problem: Error, Hashable, CustomStringConvertible {
        case unreadable(path: String, why: String)
        case secretTooShort(path: String, bytes: Int)
        case notP256PrivateKey(path: String, why: String)
        case unknownKeyID(String)
        case signingFailed(String)

        package var code: String {
            switch self {
            case .unreadable: "signing_key_unreadable"
            case .secretTooShort: "signing_key_too_short"
            case .notP256PrivateKey: "signing_key_not_p256"
            case .unknownKeyID: "signing_key_unknown_kid"
            case .signingFailed: "signing_failed"
            }
        }

        package var description: String {
            switch self {
            case .unreadable(let path, let why): "key file \(path) \(why)"
            case .secretTooShort(let path, let bytes):
                "key file \(path) holds \(bytes) bytes; an HMAC secret needs at least \(IdentitySigningKey.minimumSecretBytes) (openssl rand -base64 32)"
            case .notP256PrivateKey(let path, let why): "key file \(path): \(why)"
            case .unknownKeyID(let kid): "active_kid \(kid) is not one of the listed keys"
            case .signingFailed(let why): "signing failed: \(why)"
            }
        }
    }

    /// Reads and checks the key at `path`. Blocking file I/O: load and reload time only.
    package static func load(algorithm: IdentitySignatureAlgorithm, path: String) -> Result<Self, Problem> {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            return .failure(.unreadable(path: path, why: "not found"))
        }
        guard !isDirectory.boolValue else { return .failure(.unreadable(path: path, why: "is a directory")) }
        guard let data = FileManager.default.contents(atPath: path) else {
            return .failure(.unreadable(path: path, why: "cannot be read (permissions?)"))
        }
        guard data.count <= Self.maximumFileBytes else {
            return .failure(.unreadable(path: path, why: "is \(data.count) bytes; a key file is under 16 KiB"))
        }
        return Self.parse(algorithm: algorithm, bytes: [UInt8](data), path: path)
    }

    /// The key in `bytes` (the content of the file at `path`, named in problems).
    package static func parse(algorithm: IdentitySignatureAlgorithm, bytes: [UInt8], path: String) -> Result<
        Self, Problem
    > {
        switch algorithm {
        case .hmacSHA256:
            let isSpace: (UInt8) -> Bool = {
                $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D || $0 == 0x0B || $0 == 0x0C
            }
            var secret = bytes[...]
            while let first = secret.first, isSpace(first) { secret.removeFirst() }
            while let last = secret.last, isSpace(last) { secret.removeLast() }
            guard secret.count >= Self.minimumSecretBytes else {
                return .failure(.secretTooShort(path: path, bytes: secret.count))
            }
            return .success(.hmacSHA256(Array(secret)))
        case .es256:
            do {
                return .success(.es256(try ECPrivateKey(pkcs8PEM: String(decoding: bytes, as: UTF8.self))))
            } catch {
                return .failure(.notP256PrivateKey(path: path, why: error.reason))
            }
        }
    }

    /// HMAC-SHA256 tag (32 bytes) or ES256 `r ‖ s` (64 bytes) of `message`.
    package func signature(for message: [UInt8]) throws(Problem) -> [UInt8] {
        switch self {
        case .hmacSHA256(let secret):
            return HMACSHA256.authenticationCode(key: secret, message: message)
        case .es256(let key):
            do {
                return try key.signatureRS(for: message)
            } catch {
                throw .signingFailed(error.reason)
            }
        }
    }
}
