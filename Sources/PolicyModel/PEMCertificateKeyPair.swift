/// A certificate chain and its private key, as two PEM file paths (absolute, resolved against
/// the policy file's directory at load). The loader checks that both files exist and can be
/// read; the TLS layer parses them (and checks that the key matches the certificate).
public struct PEMCertificateKeyPair: Sendable, Hashable {
    /// The leaf certificate first, then its intermediates (a `fullchain.pem`).
    public var certificatePath: String
    /// PKCS#8 or traditional PEM, ECDSA or RSA; unencrypted.
    public var privateKeyPath: String

    public init(certificatePath: String, privateKeyPath: String) {
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
    }
}
