import Verification

/// A simulated device's App Attest key: a P-256 key pair whose key ID is SHA256 of the
/// X9.62 public key, exactly like the Secure Enclave key `DCAppAttestService` generates.
///
/// Immutable after init, hence `@unchecked Sendable` (the `EVP_PKEY` is only read).
public final class SimulatedDevice: @unchecked Sendable {
    let key: SimulatorKey
    /// X9.62 uncompressed public key, 65 bytes.
    public let publicKey: [UInt8]
    /// SHA256(publicKey): what the app reports as its key ID.
    public let keyID: [UInt8]

    /// PKCS#8 PEM of the private key (development only: unencrypted).
    public let privateKeyPEM: String

    private init(key: SimulatorKey) throws(SimulatorError) {
        self.key = key
        self.publicKey = try key.x962
        self.keyID = SHA256.hash(self.publicKey)
        self.privateKeyPEM = try key.privateKeyPEM
    }

    public static func generate() throws -> SimulatedDevice {
        try SimulatedDevice(key: SimulatorKey.generate())
    }

    /// A device from its saved key (`privateKeyPEM`).
    public convenience init(privateKeyPEM: String) throws {
        try self.init(key: SimulatorKey(pem: privateKeyPEM))
    }

    /// An assertion object in Apple's format: CBOR `{signature, authenticatorData}` where
    /// authenticatorData = SHA256(appID) | flags | counter (big endian) and the signature is
    /// ECDSA P-256 / SHA-256 over nonce = SHA256(authenticatorData || clientDataHash).
    public func assertion(
        clientDataHash: [UInt8],
        appID: String,
        counter: UInt32,
        options: AssertionOptions = .init()
    ) throws -> [UInt8] {
        var authData = options.rpIDHash ?? SHA256.hash(Array(appID.utf8))
        authData.append(options.appendExtensions ? options.flags | 0x80 : options.flags)
        authData += bigEndian(counter)
        if options.appendExtensions {
            authData += SimulatorCBOR.encode(SimulatorCBOR.map([("simulator", .textString("extension"))]))
        } else if !options.launchValidation.isEmpty || !options.launchValidation.otherEntries.isEmpty {
            authData += SimulatorCBOR.launchValidationMap(options.launchValidation)
        }
        let nonce = SHA256.hash(authData, clientDataHash)
        let signer = options.signingDevice ?? self
        var signature = try signer.key.sign(options.signConcatenationInsteadOfNonce ? authData + clientDataHash : nonce)
        if options.corruptSignature, let last = signature.indices.last {
            signature[last] ^= 0x01
        }
        return SimulatorCBOR.encode(
            SimulatorCBOR.map([
                ("signature", .byteString(signature)),
                ("authenticatorData", .byteString(authData)),
            ]))
    }
}

func bigEndian(_ value: UInt32) -> [UInt8] {
    [
        UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8),
        UInt8(truncatingIfNeeded: value),
    ]
}
