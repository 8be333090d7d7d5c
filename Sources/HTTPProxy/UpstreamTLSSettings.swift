import GatewayIO
package import PolicyModel

extension TLSClientSettings {
    /// The TLS layer's settings for an `https://` upstream (paths already resolved against the
    /// policy file by the decoder). Verification has no switch: it is always on.
    package init(upstream tls: UpstreamTLSConfiguration) {
        self.init(caFilePath: tls.caFile, clientCertificate: tls.clientCertificate.map { TLSCertificateFiles($0) })
    }
}
