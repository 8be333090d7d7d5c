/// Reads an upstream's TLS keys (`ca_file`, `client_certificate`, `client_private_key`,
/// `server_name`): allowed with an `https://` URL only, where they build the
/// `UpstreamTLSConfiguration`. There is no key that turns verification off.
struct UpstreamTLSDecoder {
    let reader: PolicyScalarReader
    let files: PolicyFilePath

    static let keys = ["ca_file", "client_certificate", "client_private_key", "server_name"]

    /// The TLS settings of an upstream whose URL named `host`; nil for `http://` (where any of
    /// `keys` is refused: it would be silently ignored, and the operator meant TLS).
    func decode(_ fields: Fields, host: String, isTLS: Bool, url: String) throws(PolicyError)
        -> UpstreamTLSConfiguration?
    {
        guard isTLS else {
            if let key = Self.keys.first(where: { fields[$0] != nil }) {
                throw self.reader.error(
                    .conflictingKeys, fields.keyMark(key), fields.path(key),
                    "\(key) applies to https:// upstreams only; url is \(PolicyScalarReader.quote(url)) (plain HTTP)")
            }
            return nil
        }
        var tls = UpstreamTLSConfiguration(serverName: host)
        if let n = fields["server_name"] {
            let name = try self.reader.string(n, expected: "a DNS name (api.internal.example)")
            guard PolicyValues.isHostName(name) else {
                throw self.reader.error(
                    .invalidValue, n,
                    "expected a DNS name for SNI and verification; found \(PolicyScalarReader.quote(name))")
            }
            tls.serverName = name.lowercased()
        }
        if let n = fields["ca_file"] { tls.caFile = try self.files.readableFile(n, what: "upstream CA file") }
        switch (fields["client_certificate"], fields["client_private_key"]) {
        case (nil, nil):
            break
        case (let certificate?, let key?):
            tls.clientCertificate = PEMCertificateKeyPair(
                certificatePath: try self.files.readableFile(certificate, what: "client certificate"),
                privateKeyPath: try self.files.readableFile(key, what: "client private key"))
        case (.some, nil):
            throw self.reader.error(
                .missingKey, fields.keyMark("client_certificate"), fields.path("client_private_key"),
                "client_certificate needs client_private_key (give both or neither)")
        case (nil, .some):
            throw self.reader.error(
                .missingKey, fields.keyMark("client_private_key"), fields.path("client_certificate"),
                "client_private_key needs client_certificate (give both or neither)")
        }
        return tls
    }
}
