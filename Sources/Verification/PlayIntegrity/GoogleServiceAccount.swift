private import COpenSSL
import Foundation

/// A Google Cloud service-account key, the JSON file the console hands out
/// (`"type": "service_account"`, `client_email`, `private_key` (PKCS#8 PEM, RSA),
/// `private_key_id`, `token_uri`), loaded once at policy load: the gateway signs its OAuth 2.0
/// JWT assertions with it (`GoogleOAuthAssertion`) to call `decodeIntegrityToken` for standard
/// Play Integrity tokens. Pure: the caller reads the file.
///
/// Sendable because it is immutable after `init`: each signature gets its own `EVP_MD_CTX`,
/// and OpenSSL allows one `EVP_PKEY` to sign from several threads at once.
public final class GoogleServiceAccount: @unchecked Sendable {
    /// Largest key file accepted; Google's files are about 2.3 KiB.
    public static let maximumFileBytes = 16 * 1024
    /// Google's token endpoint, used when the file names none.
    public static let defaultTokenURI = "https://oauth2.googleapis.com/token"

    /// The account's e-mail: the assertion's `iss`.
    public let clientEmail: String
    /// The key's ID: the assertion header's `kid` (nil when the file has none).
    public let privateKeyID: String?
    /// Where the assertion is exchanged for an access token: the assertion's `aud`.
    public let tokenURI: String
    /// The public half, DER SubjectPublicKeyInfo (tests, the fake Google).
    public let publicKeySPKI: [UInt8]
    private let key: OpaquePointer  // EVP_PKEY *

    /// - Parameter json: the bytes of the key file.
    public init(json: [UInt8]) throws(PlayIntegrityError) {
        guard !json.isEmpty, json.count <= Self.maximumFileBytes else {
            throw Self.invalid("the file is \(json.count) bytes; a service-account key file is 1 to 16 KiB of JSON")
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any] else {
            throw Self.invalid("the file is not a JSON object")
        }
        guard (object["type"] as? String) == "service_account" else {
            throw Self.invalid("\"type\" is not \"service_account\" (is this an OAuth client file?)")
        }
        guard let email = object["client_email"] as? String, !email.isEmpty, email.utf8.count <= 320,
            email.contains("@")
        else {
            throw Self.invalid("\"client_email\" is missing or not an e-mail address")
        }
        guard let pem = object["private_key"] as? String, !pem.isEmpty else {
            throw Self.invalid("\"private_key\" is missing")
        }
        var keyID: String?
        if let value = object["private_key_id"] {
            guard let text = value as? String, text.utf8.count <= 128,
                text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") })
            else {
                throw Self.invalid("\"private_key_id\" is not a short printable string")
            }
            keyID = text.isEmpty ? nil : text
        }
        var tokenURI = Self.defaultTokenURI
        if let value = object["token_uri"] {
            guard let text = value as? String, text.hasPrefix("https://"), text.utf8.count <= 512 else {
                throw Self.invalid("\"token_uri\" is not an https:// URL")
            }
            tokenURI = text
        }
        self.clientEmail = email
        self.privateKeyID = keyID
        self.tokenURI = tokenURI
        let (key, spki) = try Self.loadRSA(pem)
        self.key = key
        self.publicKeySPKI = spki
    }

    deinit { EVP_PKEY_free(self.key) }

    /// RSASSA-PKCS1-v1_5 with SHA-256 (JOSE `RS256`, RFC 7518 §3.3) over `message`.
    public func signRS256(_ message: [UInt8]) throws(PlayIntegrityError) -> [UInt8] {
        defer { ERR_clear_error() }
        guard let ctx = EVP_MD_CTX_new() else { throw Self.internalFailure("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, self.key) == 1 else {
            throw Self.internalFailure("EVP_DigestSignInit")
        }
        var length = 0
        guard message.withUnsafeBufferPointer({ EVP_DigestSign(ctx, nil, &length, $0.baseAddress, $0.count) }) == 1
        else { throw Self.internalFailure("EVP_DigestSign (size)") }
        var signature = [UInt8](repeating: 0, count: length)
        let signed = signature.withUnsafeMutableBufferPointer { out in
            message.withUnsafeBufferPointer { EVP_DigestSign(ctx, out.baseAddress, &length, $0.baseAddress, $0.count) }
        }
        guard signed == 1 else { throw Self.internalFailure("EVP_DigestSign") }
        return Array(signature.prefix(length))
    }

    /// The RSA key (2048 to 8192 bits) of the one `PRIVATE KEY` PEM block, and its SPKI.
    private static func loadRSA(_ pem: String) throws(PlayIntegrityError) -> (OpaquePointer, [UInt8]) {
        defer { ERR_clear_error() }
        let begin = "-----BEGIN PRIVATE KEY-----"
        let end = "-----END PRIVATE KEY-----"
        guard let start = pem.range(of: begin), let stop = pem.range(of: end, range: start.upperBound..<pem.endIndex)
        else {
            throw Self.invalid(
                "\"private_key\" holds no -----BEGIN PRIVATE KEY----- block (PKCS#8, as Google writes it)")
        }
        let body = pem[start.upperBound..<stop.lowerBound].filter { !$0.isWhitespace }
        guard let data = Data(base64Encoded: String(body)) else {
            throw Self.invalid("the PRIVATE KEY block is not base64")
        }
        let der = [UInt8](data)
        let info: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PKCS8_PRIV_KEY_INFO(nil, &cursor, buffer.count)
        }
        guard let info else { throw Self.invalid("the PRIVATE KEY block is not a DER PKCS#8 PrivateKeyInfo") }
        defer { PKCS8_PRIV_KEY_INFO_free(info) }
        guard let key = EVP_PKCS82PKEY(info) else {
            throw Self.invalid("the PKCS#8 block holds no key OpenSSL can load")
        }
        guard EVP_PKEY_is_a(key, "RSA") == 1 else {
            EVP_PKEY_free(key)
            throw Self.invalid("the private key is not RSA (Google's service-account keys are RSA for RS256)")
        }
        let bits = EVP_PKEY_get_bits(key)
        guard (2048...8192).contains(bits) else {
            EVP_PKEY_free(key)
            throw Self.invalid("the RSA key has \(bits) bits; 2048 to 8192 are accepted")
        }
        var raw: UnsafeMutablePointer<UInt8>?
        let count = i2d_PUBKEY(key, &raw)
        guard count > 0, let raw else {
            EVP_PKEY_free(key)
            throw Self.internalFailure("i2d_PUBKEY")
        }
        let spki = Array(UnsafeBufferPointer(start: raw, count: Int(count)))
        COpenSSL_free(raw)
        return (key, spki)
    }

    private static func invalid(_ reason: String) -> PlayIntegrityError {
        PlayIntegrityError(.serviceAccountInvalid, "service-account key file: \(reason)")
    }

    private static func internalFailure(_ operation: String) -> PlayIntegrityError {
        PlayIntegrityError(.serviceAccountInvalid, "\(operation) failed: \(OpenSSLErrorQueue.drain())")
    }
}
