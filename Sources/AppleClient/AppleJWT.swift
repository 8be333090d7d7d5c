public import Foundation
import GatewayIO
public import Verification

/// Signs the JSON Web Tokens Apple's DeviceCheck and App Attest servers want in
/// `Authorization`: ES256 (ECDSA P-256, SHA-256) with the team's DeviceCheck key,
/// header `{"alg":"ES256","kid":KEY_ID}`, claims `{"iss":TEAM_ID,"iat":SECONDS}`
/// (docs/apple-services.md has Apple's rules and the sources).
///
/// The signature is JOSE's 64-byte `r ‖ s` (RFC 7518 §3.4), not DER; the three parts are
/// base64url without padding (RFC 7515). Apple refuses a token whose `iat` is more than an
/// hour old, so tokens are cached and re-signed by `AppleJWTCache`.
///
/// Sendable: the key is immutable and each signature gets its own OpenSSL context.
public struct AppleJWT: Sendable {
    /// `iss`: the 10-character team ID.
    public let teamID: String
    /// `kid`: the 10-character ID of the key (from the name `AuthKey_<KEY_ID>.p8`).
    public let keyID: String
    private let key: ECPrivateKey

    /// Largest key file read (a `.p8` is about 250 bytes).
    public static let maximumKeyFileBytes = 16 * 1024

    public init(teamID: String, keyID: String, privateKey: ECPrivateKey) {
        self.teamID = teamID
        self.keyID = keyID
        self.key = privateKey
    }

    /// From the text of a `.p8` file.
    public init(teamID: String, keyID: String, privateKeyPEM: String) throws(AppleError) {
        do {
            self.init(teamID: teamID, keyID: keyID, privateKey: try ECPrivateKey(pkcs8PEM: privateKeyPEM))
        } catch {
            throw Self.keyError(error)
        }
    }

    /// Reads and parses the `.p8` file at `path` (policy `apple.private_key_file`). Blocking
    /// file I/O: call it at load or reload time, never on an event loop.
    public static func load(teamID: String, keyID: String, privateKeyFile path: String) throws(AppleError) -> AppleJWT {
        let pem = try Self.readKeyFile(path)
        return try AppleJWT(teamID: teamID, keyID: keyID, privateKeyPEM: pem)
    }

    /// The key file's text, or `apple_private_key_unreadable` naming the path (never the content).
    static func readKeyFile(_ path: String) throws(AppleError) -> String {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw AppleError(.privateKeyUnreadable, "Apple private key file \(path) does not exist")
        }
        guard !isDirectory.boolValue else {
            throw AppleError(.privateKeyUnreadable, "Apple private key file \(path) is a directory")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw AppleError(.privateKeyUnreadable, "Apple private key file \(path) cannot be read (permissions?)")
        }
        guard !data.isEmpty, data.count <= Self.maximumKeyFileBytes else {
            throw AppleError(
                .privateKeyUnreadable,
                "Apple private key file \(path) is \(data.count) bytes; expected a .p8 key of about 250 bytes")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// The public key (X9.62, 65 bytes), e.g. for a fake server or `apple check` output.
    public var publicKeyX962: [UInt8] { self.key.publicKeyX962 }

    /// A token issued at `issuedAt` (whole seconds since the Unix epoch, rounded down).
    public func token(issuedAt: Date) throws(AppleError) -> String {
        let header = JSONText.object([("alg", JSONText.quote("ES256")), ("kid", JSONText.quote(self.keyID))])
        let iat = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        let claims = JSONText.object([("iss", JSONText.quote(self.teamID)), ("iat", String(iat))])
        let signingInput =
            Base64Text.encodeURL(Array(header.utf8)) + "."
            + Base64Text.encodeURL(Array(claims.utf8))
        let signature: [UInt8]
        do {
            signature = try self.key.signatureRS(for: Array(signingInput.utf8))
        } catch {
            throw AppleError(.jwtSigningFailed, "signing the Apple JWT failed: \(error.reason)")
        }
        return signingInput + "." + Base64Text.encodeURL(signature)
    }

    private static func keyError(_ error: VerificationError) -> AppleError {
        switch error.code {
        case .privateKeyNotP256: AppleError(.privateKeyNotP256, error.reason)
        case .privateKeyNotPKCS8: AppleError(.privateKeyNotPKCS8, error.reason)
        default: AppleError(.privateKeyNotPKCS8, error.reason)
        }
    }
}
