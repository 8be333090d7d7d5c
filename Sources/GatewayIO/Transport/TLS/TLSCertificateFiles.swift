/// A certificate chain and its private key, as PEM files (paths already resolved against
/// the policy file). The chain file starts with the leaf; intermediates follow.
package struct TLSCertificateFiles: Hashable, Sendable {
    package var certificateChainPath: String
    package var privateKeyPath: String

    package init(certificateChainPath: String, privateKeyPath: String) {
        self.certificateChainPath = certificateChainPath
        self.privateKeyPath = privateKeyPath
    }
}
