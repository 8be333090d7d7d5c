import GatewayIO
package import PolicyModel

extension TLSServerSettings {
    /// The TLS layer's settings for a listener's `tls:` block (paths already resolved against
    /// the policy file by the decoder).
    package init(listener tls: ListenerTLSConfiguration) {
        self.init(
            certificate: TLSCertificateFiles(tls.defaultCertificate),
            serverNameCertificates: tls.serverNameCertificates.map {
                TLSServerNameCertificate(serverNames: $0.serverNames, files: TLSCertificateFiles($0.certificate))
            },
            ticketKeyFilePath: tls.sessionTickets?.keyFile,
            ticketRotation: tls.sessionTickets?.rotation ?? ListenerTLSConfiguration.defaultTicketRotation,
            clientAuthentication: tls.clientCertificates.map {
                TLSClientAuthentication(caFilePath: $0.caFile, mode: $0.mode == .required ? .required : .optional)
            })
        self.offersHTTP2 = tls.http2
    }
}

extension TLSCertificateFiles {
    package init(_ pair: PEMCertificateKeyPair) {
        self.init(certificateChainPath: pair.certificatePath, privateKeyPath: pair.privateKeyPath)
    }
}
