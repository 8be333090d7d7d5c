import Foundation
import Verification

/// A test root and batch intermediate shaped like Google's Key Attestation chains (root →
/// batch/intermediate → leaf with the KeyDescription), for `sim` and the tests: the gateway
/// trusts it only when a policy lists its root under `android.trust_anchors`.
///
/// Immutable after creation, hence `@unchecked Sendable` (its OpenSSL objects are only read).
public final class SimulatedAndroidAuthority: @unchecked Sendable {
    private let rootKey: SimulatorKey
    private let root: SimulatorCertificate
    private let batchKey: SimulatorKey
    private let batch: SimulatorCertificate

    /// PEM of the root: the file to list under `android.trust_anchors`.
    public let rootCertificatePEM: String

    public enum FileName {
        public static let rootCertificate = "android_root.pem"
        public static let rootKey = "android_root_key.pem"
        public static let batchCertificate = "android_batch.pem"
        public static let batchKey = "android_batch_key.pem"
    }

    private init(
        rootKey: SimulatorKey, root: SimulatorCertificate, batchKey: SimulatorKey, batch: SimulatorCertificate
    ) throws(SimulatorError) {
        self.rootKey = rootKey
        self.root = root
        self.batchKey = batchKey
        self.batch = batch
        self.rootCertificatePEM = try root.pem
    }

    /// A new authority, valid from 10 years before now to 20 years after.
    public static func generate() throws -> SimulatedAndroidAuthority {
        let now = Date()
        let notBefore = now.addingTimeInterval(-10 * 365 * 86_400)
        let notAfter = now.addingTimeInterval(20 * 365 * 86_400)
        let rootKey = try SimulatorKey.generate(.p256)
        let root = try SimulatorCertificate.issue(
            .init(
                commonName: "attest-gateway Simulator Android Root", notBefore: notBefore, notAfter: notAfter,
                isCA: true, keyUsage: "keyCertSign,cRLSign"),
            subjectKey: rootKey, issuer: nil, issuerKey: rootKey)
        let batchKey = try SimulatorKey.generate(.p256)
        let batch = try SimulatorCertificate.issue(
            .init(
                commonName: "attest-gateway Simulator Android Batch", notBefore: notBefore, notAfter: notAfter,
                isCA: true, keyUsage: "keyCertSign,cRLSign"),
            subjectKey: batchKey, issuer: root, issuerKey: rootKey)
        return try SimulatedAndroidAuthority(rootKey: rootKey, root: root, batchKey: batchKey, batch: batch)
    }

    /// Loads an authority written by `save(directory:)`.
    public static func load(directory: String) throws -> SimulatedAndroidAuthority {
        func read(_ name: String) throws -> String {
            let path = (directory as NSString).appendingPathComponent(name)
            do {
                return try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                throw SimulatorError("cannot read \(path): \(error.localizedDescription)")
            }
        }
        return try SimulatedAndroidAuthority(
            rootKey: SimulatorKey(pem: read(FileName.rootKey)),
            root: SimulatorCertificate(pem: read(FileName.rootCertificate)),
            batchKey: SimulatorKey(pem: read(FileName.batchKey)),
            batch: SimulatorCertificate(pem: read(FileName.batchCertificate)))
    }

    /// Writes the root (the trust anchor), the batch certificate and both keys (mode 0600).
    public func save(directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let files: [(String, String, Bool)] = [
            (FileName.rootCertificate, self.rootCertificatePEM, false),
            (FileName.rootKey, try self.rootKey.privateKeyPEM, true),
            (FileName.batchCertificate, try self.batch.pem, false),
            (FileName.batchKey, try self.batchKey.privateKeyPEM, true),
        ]
        for (name, contents, secret) in files {
            let path = (directory as NSString).appendingPathComponent(name)
            try SimulatorFiles.writeAtomically(Array(contents.utf8), to: path, mode: secret ? 0o600 : 0o644)
        }
    }

    /// A new Keystore key and its attestation chain (leaf, batch, root; DER) over `challenge`.
    public func generateKey(
        challenge: [UInt8], options: AndroidAttestationOptions = AndroidAttestationOptions()
    ) throws -> SimulatedAndroidKey {
        let key = try SimulatorKey.generate(.p256)
        let now = Date()
        let leaf = try SimulatorCertificate.issue(
            .init(
                commonName: "Android Keystore Key", notBefore: now.addingTimeInterval(-86_400),
                notAfter: now.addingTimeInterval(10 * 365 * 86_400), isCA: false, keyUsage: "digitalSignature",
                keyIdentifiers: false,
                customExtensions: [
                    (
                        AndroidKeyDescription.oid,
                        AndroidKeyDescriptionBuilder.keyDescription(options, challenge: challenge)
                    )
                ]),
            subjectKey: key, issuer: self.batch, issuerKey: self.batchKey)
        return try SimulatedAndroidKey(key: key, chain: [leaf.der, self.batch.der, self.root.der])
    }
}

/// A simulated Android Keystore key: its chain and the request signatures of the Android
/// protocol (`AndroidRequestSignature`). `@unchecked Sendable`: the `EVP_PKEY` is only read.
public final class SimulatedAndroidKey: @unchecked Sendable {
    let key: SimulatorKey
    /// DER certificates, leaf first.
    public let chain: [[UInt8]]
    /// Standard base64 of SHA-256 of the leaf's DER SubjectPublicKeyInfo: the gateway's key ID.
    public let keyID: String
    /// PKCS#8 PEM (development only).
    public let privateKeyPEM: String

    init(key: SimulatorKey, chain: [[UInt8]]) throws {
        self.key = key
        self.chain = chain
        let point = try key.x962
        // DER SubjectPublicKeyInfo of an EC P-256 key: the fixed 26-byte prefix, then the point.
        let prefix: [UInt8] = [
            0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86,
            0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
        ]
        self.keyID = Data(SHA256.hash(prefix + point)).base64EncodedString()
        self.privateKeyPEM = try key.privateKeyPEM
    }

    /// The key from a saved private key and chain.
    public convenience init(privateKeyPEM: String, chain: [[UInt8]]) throws {
        try self.init(key: SimulatorKey(pem: privateKeyPEM), chain: chain)
    }

    /// `X-App-Assertion` bytes: counter (8 bytes BE) || DER ECDSA signature over
    /// `AndroidRequestSignature.signedBytes(counter:clientDataHash:)`.
    public func assertion(clientDataHash: [UInt8], counter: UInt64) throws -> [UInt8] {
        let message = AndroidRequestSignature.signedBytes(counter: counter, clientDataHash: clientDataHash)
        let signature = try self.key.sign(message)
        return Array(message[AndroidRequestSignature.versionTag.count..<(AndroidRequestSignature.versionTag.count + 8)])
            + signature
    }
}
