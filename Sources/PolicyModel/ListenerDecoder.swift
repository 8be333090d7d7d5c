/// Decodes `listen:` entries into `ListenerConfiguration`s: a `host:port` string, or an object
/// `{address, tls, proxy_protocol}` (schema: the `listen[i]` rows of docs/operations.md). Files
/// named by `tls:` are checked to exist and be readable; their PEM is the TLS layer's to parse.
struct ListenerDecoder {
    let reader: PolicyScalarReader
    let files: PolicyFilePath

    static let listenerKeys = ["address", "tls", "proxy_protocol", "h2c"]
    static let tlsKeys = [
        "certificate", "private_key", "sni", "client_certificates", "session_tickets", "handshake_timeout",
        "client_subject_header", "http2",
    ]
    static let serverNameKeys = ["server_names", "certificate", "private_key"]
    static let clientCertificateKeys = ["ca_file", "mode"]
    static let sessionTicketKeys = ["key_file", "rotation"]

    /// Bounds of `session_tickets.rotation`: more often than a minute and resumption rarely
    /// succeeds; a day is the most the spec's forward-secrecy advice allows (RFC 8446 §4.6.1).
    static let ticketRotationRange = Duration.seconds(60)...Duration.seconds(86_400)

    /// Header names `client_subject_header` may not take: the proxy writes or removes these
    /// itself, so the subject would be lost or would overwrite routing information.
    static let refusedSubjectHeaders: Set<String> = [
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer", "upgrade",
        "forwarded", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-app-assertion", "expect",
        "x-real-ip",
    ]

    // MARK: - listen

    /// One entry of `listen:` (or its single value).
    func decodeListener(_ node: YAMLNode) throws(PolicyError) -> ListenerConfiguration {
        if case .mapping = node.content {
            let fields = try self.reader.mapping(node, keys: Self.listenerKeys)
            guard let addressNode = fields["address"] else {
                throw self.reader.error(
                    .missingKey, node.mark, fields.path("address"), "required: address: host:port (e.g. 0.0.0.0:8443)")
            }
            var listener = ListenerConfiguration(
                address: try self.address(addressNode, expected: "host:port (e.g. 0.0.0.0:8443)"))
            if let n = fields["tls"] { listener.tls = try self.decodeTLS(n) }
            if let n = fields["proxy_protocol"] { listener.proxyProtocol = try self.reader.bool(n) }
            if let n = fields["h2c"] {
                listener.h2c = try self.reader.bool(n)
                if listener.h2c && listener.tls != nil {
                    throw self.reader.error(
                        .invalidValue, n,
                        "h2c is HTTP/2 on a plain listener; a tls listener offers h2 through ALPN (tls.http2, default true)"
                    )
                }
            }
            return listener
        }
        return ListenerConfiguration(
            address: try self.address(
                node, expected: "host:port (e.g. 0.0.0.0:8080) or a listener {address: host:port, tls: ...}"))
    }

    /// `host:port`, as `listen:` and `admin_listen:` take it; `expected` names what the key
    /// accepts in the wrong-type message.
    func address(_ node: YAMLNode, expected: String = "host:port (e.g. 0.0.0.0:8080)") throws(PolicyError)
        -> ListenAddress
    {
        let text = try self.reader.string(node, expected: expected)
        switch PolicyValues.listenAddress(text) {
        case .success(let address): return address
        case .failure(let problem):
            throw self.reader.error(.invalidListenAddress, node, "expected host:port; \(problem.text)")
        }
    }

    // MARK: - tls

    private func decodeTLS(_ node: YAMLNode) throws(PolicyError) -> ListenerTLSConfiguration {
        let fields = try self.reader.mapping(node, keys: Self.tlsKeys)
        var tls = ListenerTLSConfiguration(
            defaultCertificate: try self.certificateKeyPair(fields, certificate: "certificate", key: "private_key"))
        if let n = fields["sni"] { tls.serverNameCertificates = try self.decodeServerNames(n) }
        if let n = fields["client_certificates"] {
            let client = try self.reader.mapping(n, keys: Self.clientCertificateKeys)
            guard let caNode = client["ca_file"] else {
                throw self.reader.error(
                    .missingKey, n.mark, client.path("ca_file"),
                    "required: ca_file: the PEM file of the CAs client certificates must chain to")
            }
            var verification = ListenerTLSConfiguration.ClientCertificates(
                caFile: try self.files.readableFile(caNode, what: "client CA file"))
            if let m = client["mode"] { verification.mode = try self.reader.oneOf(m) }
            tls.clientCertificates = verification
        }
        if let n = fields["session_tickets"] { tls.sessionTickets = try self.decodeSessionTickets(n) }
        if let n = fields["http2"] { tls.http2 = try self.reader.bool(n) }
        if let n = fields["handshake_timeout"] {
            tls.handshakeTimeout = try self.reader.duration(
                n, in: .milliseconds(1)...ListenerTLSConfiguration.maximumHandshakeTimeout)
        }
        if let n = fields["client_subject_header"] {
            let name = try self.reader.string(n, expected: "a header name (X-Client-Cert-Subject)")
            let lower = name.lowercased()
            guard Self.isHeaderName(name) else {
                throw self.reader.error(
                    .invalidValue, n,
                    "expected a header name of letters, digits and !#$%&'*+-.^_`|~; found \(PolicyScalarReader.quote(name))"
                )
            }
            guard !Self.refusedSubjectHeaders.contains(lower), !lower.hasPrefix("x-app-attest-") else {
                throw self.reader.error(
                    .invalidValue, n,
                    "\(PolicyScalarReader.quote(name)) is a header the gateway writes or removes itself; choose another name (default \(ListenerTLSConfiguration.defaultClientSubjectHeader))"
                )
            }
            tls.clientSubjectHeader = name
        }
        return tls
    }

    private func certificateKeyPair(
        _ fields: Fields, certificate: String, key: String
    ) throws(PolicyError) -> PEMCertificateKeyPair {
        guard let certificateNode = fields[certificate] else {
            throw self.reader.error(
                .missingKey, fields.node.mark, fields.path(certificate),
                "required: \(certificate): the PEM certificate chain (leaf first)")
        }
        guard let keyNode = fields[key] else {
            throw self.reader.error(
                .missingKey, fields.node.mark, fields.path(key), "required: \(key): the certificate's PEM private key")
        }
        return PEMCertificateKeyPair(
            certificatePath: try self.files.readableFile(certificateNode, what: "certificate"),
            privateKeyPath: try self.files.readableFile(keyNode, what: "private key")
        )
    }

    private func decodeServerNames(
        _ node: YAMLNode
    ) throws(PolicyError) -> [ListenerTLSConfiguration.ServerNameCertificate] {
        var entries: [ListenerTLSConfiguration.ServerNameCertificate] = []
        var seen: [String: String] = [:]
        for item in try self.reader.list(node, expected: "a list of {server_names, certificate, private_key}") {
            let fields = try self.reader.mapping(item, keys: Self.serverNameKeys)
            guard let namesNode = fields["server_names"] else {
                throw self.reader.error(
                    .missingKey, item.mark, fields.path("server_names"),
                    "required: server_names: [api.example.com, \"*.example.org\"]")
            }
            let nameNodes = try self.reader.list(namesNode, expected: "a list of server names")
            guard !nameNodes.isEmpty else {
                throw self.reader.error(
                    .invalidValue, namesNode, "expected at least one server name; found an empty list")
            }
            var names: [String] = []
            for nameNode in nameNodes {
                let text = try self.reader.string(nameNode, expected: "a server name (api.example.com, *.example.org)")
                let name = text.lowercased()
                guard Self.isServerName(name) else {
                    throw self.reader.error(
                        .invalidValue, nameNode,
                        "expected a DNS name, or *. and a DNS name (one wildcard, leftmost label only); found \(PolicyScalarReader.quote(text))"
                    )
                }
                if let first = seen[name] {
                    throw self.reader.error(
                        .duplicateServerName, nameNode,
                        "\(PolicyScalarReader.quote(name)) is already listed at \(first)")
                }
                seen[name] = nameNode.path
                names.append(name)
            }
            entries.append(
                .init(
                    serverNames: names,
                    certificate: try self.certificateKeyPair(fields, certificate: "certificate", key: "private_key")))
        }
        return entries
    }

    private func decodeSessionTickets(_ node: YAMLNode) throws(PolicyError) -> ListenerTLSConfiguration.SessionTickets {
        let fields = try self.reader.mapping(node, keys: Self.sessionTicketKeys)
        var tickets = ListenerTLSConfiguration.SessionTickets()
        if let n = fields["key_file"] {
            let keyBytes = ListenerTLSConfiguration.SessionTickets.keyBytes
            let maximum = ListenerTLSConfiguration.SessionTickets.maximumKeys
            tickets.keyFile = try self.files.readableFile(n, what: "session ticket key file") { bytes in
                if bytes > 0, bytes % keyBytes == 0, bytes <= keyBytes * maximum { return nil }
                return
                    "holds \(bytes) bytes; expected 1 to \(maximum) keys of \(keyBytes) bytes each (openssl rand 80 > ticket.key)"
            }
        }
        if let n = fields["rotation"] { tickets.rotation = try self.reader.duration(n, in: Self.ticketRotationRange) }
        return tickets
    }

    // MARK: - Values

    /// A DNS name (`api.example.com`) or one with a leftmost wildcard label (`*.example.org`),
    /// lowercase. A bare `*` or `*.com`-style single label after the wildcard is refused: it
    /// would match a whole top-level domain.
    static func isServerName(_ name: String) -> Bool {
        guard name.hasPrefix("*.") else { return PolicyValues.isHostName(name) }
        let rest = name.dropFirst(2)
        return rest.contains(".") && PolicyValues.isHostName(rest)
    }

    /// RFC 9110 §5.6.2 token.
    static func isHeaderName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 128
            && name.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
    }
}
