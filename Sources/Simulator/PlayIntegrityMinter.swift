private import CJOSE
import Foundation
public import Verification

/// Test keys for Play Integrity classic tokens: what Play Console shows an app's developer (an
/// AES-256 decryption key and an EC P-256 verification key) and the signing half Google keeps.
public struct PlayIntegrityTestKeys: Sendable {
    /// 32 bytes.
    public let decryptionKey: [UInt8]
    /// PKCS#8 PEM of the P-256 signing key.
    public let signingKeyPEM: String
    /// DER SubjectPublicKeyInfo of the verification key.
    public let verificationKeySPKI: [UInt8]

    public init(decryptionKey: [UInt8], signingKeyPEM: String) throws(SimulatorError) {
        guard decryptionKey.count == 32 else { throw SimulatorError("a Play Integrity decryption key is 32 bytes") }
        let signer: ECPrivateKey
        do {
            signer = try ECPrivateKey(pkcs8PEM: signingKeyPEM)
        } catch {
            throw SimulatorError("Play Integrity signing key: \(error.reason)")
        }
        self.decryptionKey = decryptionKey
        self.signingKeyPEM = signingKeyPEM
        self.verificationKeySPKI = Self.p256SPKIPrefix + signer.publicKeyX962
    }

    /// Fresh keys (random AES key, new P-256 key).
    public static func generate() throws(SimulatorError) -> PlayIntegrityTestKeys {
        var generator = SystemRandomNumberGenerator()
        let aes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return try PlayIntegrityTestKeys(decryptionKey: aes, signingKeyPEM: try SimulatorKey.generate().privateKeyPEM)
    }

    /// The decryption key as Play Console shows it (standard base64).
    public var decryptionKeyBase64: String { Data(self.decryptionKey).base64EncodedString() }
    /// The verification key as Play Console shows it (standard base64 of the DER SPKI).
    public var verificationKeyBase64: String { Data(self.verificationKeySPKI).base64EncodedString() }

    /// SubjectPublicKeyInfo header of an uncompressed P-256 point (id-ecPublicKey, prime256v1).
    static let p256SPKIPrefix: [UInt8] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A, 0x86, 0x48,
        0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ]
}

/// Mints Play Integrity classic tokens as Google's servers do: the verdict JSON signed as a
/// compact JWS (ES256, the project's signer) inside a compact JWE (A256KW + A256GCM, cjose).
/// The raw entry points make the bad tokens the tests need (another `alg`, a tampered part,
/// a payload that is not Google's) from real keys.
public struct PlayIntegrityMinter: Sendable {
    public let keys: PlayIntegrityTestKeys
    private let signer: ECPrivateKey

    public init(keys: PlayIntegrityTestKeys) throws(SimulatorError) {
        self.keys = keys
        do {
            self.signer = try ECPrivateKey(pkcs8PEM: keys.signingKeyPEM)
        } catch {
            throw SimulatorError("Play Integrity signing key: \(error.reason)")
        }
    }

    /// A token carrying `payload`.
    public func mint(_ payload: PlayIntegrityPayload) throws(SimulatorError) -> String {
        try self.mint(payloadJSON: try Self.json(payload))
    }

    /// A token carrying any JSON bytes, under any JWS header.
    public func mint(payloadJSON: [UInt8], jwsHeaderJSON: [UInt8] = Array(#"{"alg":"ES256"}"#.utf8))
        throws(SimulatorError) -> String
    {
        try self.encrypt(Array(try self.signedJWS(payloadJSON: payloadJSON, headerJSON: jwsHeaderJSON).utf8))
    }

    /// The inner compact JWS, ES256 under the signing key.
    public func signedJWS(payloadJSON: [UInt8], headerJSON: [UInt8] = Array(#"{"alg":"ES256"}"#.utf8))
        throws(SimulatorError) -> String
    {
        let signingInput = Base64URL.encode(headerJSON) + "." + Base64URL.encode(payloadJSON)
        do {
            return signingInput + "." + Base64URL.encode(try self.signer.signatureRS(for: Array(signingInput.utf8)))
        } catch {
            throw SimulatorError("ES256 signing failed: \(error.reason)")
        }
    }

    /// `plaintext` as a compact JWE, alg A256KW, enc A256GCM, under the decryption key (cjose).
    public func encrypt(_ plaintext: [UInt8]) throws(SimulatorError) -> String {
        try Self.encrypt(plaintext, key: self.keys.decryptionKey)
    }

    public static func encrypt(_ plaintext: [UInt8], key: [UInt8]) throws(SimulatorError) -> String {
        var errorCode: Int32 = 0
        let text = key.withUnsafeBufferPointer { keyBytes in
            plaintext.withUnsafeBufferPointer { bytes in
                CJOSE_encrypt_compact_a256kw_a256gcm(
                    keyBytes.baseAddress, keyBytes.count, bytes.baseAddress, bytes.count, &errorCode)
            }
        }
        guard let text else { throw SimulatorError("cjose could not encrypt the JWE (cjose error \(errorCode))") }
        defer { CJOSE_free(text) }
        return String(cString: text)
    }

    /// A verdict that passes the default policy: `PLAY_RECOGNIZED`, `MEETS_DEVICE_INTEGRITY`,
    /// `LICENSED`, `LEVEL_1`, for `packageName` signed with `certificateDigest` (32 bytes).
    public static func goodPayload(
        packageName: String, nonce: String, certificateDigest: [UInt8], timestampMillis: Int64, versionCode: Int64 = 42
    ) -> PlayIntegrityPayload {
        PlayIntegrityPayload(
            requestDetails: .init(requestPackageName: packageName, timestampMillis: timestampMillis, nonce: nonce),
            appIntegrity: .init(
                appRecognitionVerdict: .playRecognized, packageName: packageName,
                certificateSha256Digest: [Base64URL.encode(certificateDigest)], versionCode: versionCode),
            deviceIntegrity: .init(
                deviceRecognitionVerdict: [.meetsDeviceIntegrity],
                recentDeviceActivity: .init(deviceActivityLevel: .level1)),
            accountDetails: .init(appLicensingVerdict: .licensed),
            environmentDetails: .init(playProtectVerdict: "NO_ISSUES"))
    }

    /// Google's JSON of `payload` (members sorted, slashes unescaped).
    public static func json(_ payload: PlayIntegrityPayload) throws(SimulatorError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return [UInt8](try encoder.encode(payload))
        } catch {
            throw SimulatorError("the verdict could not be encoded as JSON")
        }
    }
}
