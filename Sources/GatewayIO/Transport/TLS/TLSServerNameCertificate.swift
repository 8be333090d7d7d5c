/// An extra listener certificate, served when the client's SNI matches one of
/// `serverNames`: an exact DNS name (`api.example.com`) or a wildcard over one label
/// (`*.example.com` matches `a.example.com`, not `example.com` nor `a.b.example.com`).
/// Names are compared case-insensitively; a client without SNI or with an unknown name gets
/// the default certificate (as nginx's default server does). Empty `serverNames`: the
/// certificate's own DNS subjectAltNames.
package struct TLSServerNameCertificate: Hashable, Sendable {
    package var serverNames: [String]
    package var files: TLSCertificateFiles

    package init(serverNames: [String], files: TLSCertificateFiles) {
        self.serverNames = serverNames
        self.files = files
    }
}
