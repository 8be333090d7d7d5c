import Foundation
import GatewayTesting
import Testing

@testable import PolicyModel

/// `listen:` objects with `tls:` and `proxy_protocol:`, and `https://` upstreams: paths resolve
/// against the policy file's directory, every file is checked at load, and each refusal names
/// the file, line and field.
@Suite struct ListenerTLSPolicyTests {
    /// A directory holding the policy and the files it names (contents are not parsed here).
    struct PolicyDirectory {
        let path: String

        init() throws {
            self.path =
                FileManager.default.temporaryDirectory
                .appendingPathComponent("tls-policy-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: self.path + "/certs", withIntermediateDirectories: true)
            for name in ["fullchain.pem", "key.pem", "api.pem", "api-key.pem", "clients-ca.pem", "upstream-ca.pem"] {
                try self.write("certs/\(name)", "-----BEGIN PLACEHOLDER-----\n")
            }
            try self.write("certs/ticket.key", String(repeating: "k", count: 160))
        }

        func write(_ name: String, _ text: String) throws {
            try text.write(toFile: self.path + "/" + name, atomically: true, encoding: .utf8)
        }

        /// Writes `policies.yaml` and loads it.
        func load(_ text: String) throws(PolicyError) -> GatewayPolicy {
            do {
                try self.write("policies.yaml", text)
            } catch {
                Issue.record("cannot write the policy: \(error)")
            }
            return try PolicyLoader.load(path: self.path + "/policies.yaml")
        }

        func error(_ text: String) -> PolicyError? {
            do {
                _ = try self.load(text)
                Issue.record("expected the policy to be refused")
                return nil
            } catch {
                return error
            }
        }

        func remove() { try? FileManager.default.removeItem(atPath: self.path) }
    }

    static func policy(listen: String, upstream: String = "{ url: \"http://127.0.0.1:9000\" }") -> String {
        """
        store: memory
        listen:
        \(listen)
        upstreams:
          api: \(upstream)
        routes:
          - { match: { path_prefix: / }, upstream: api, mode: off }

        """
    }

    static let fullListener = """
          - "127.0.0.1:8080"
          - address: "0.0.0.0:8443"
            proxy_protocol: true
            tls:
              certificate: certs/fullchain.pem
              private_key: certs/key.pem
              sni:
                - server_names: [api.example.com, "*.Example.org"]
                  certificate: certs/api.pem
                  private_key: certs/api-key.pem
              client_certificates: { ca_file: certs/clients-ca.pem, mode: optional }
              session_tickets: { key_file: certs/ticket.key, rotation: 6h }
              handshake_timeout: 5s
              client_subject_header: X-Verified-Subject
        """

    @Test func plainStringsStillListenWithoutTLS() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        let policy = try directory.load(Self.policy(listen: "  - \"127.0.0.1:8080\"\n  - \"[::1]:8081\""))
        #expect(policy.listeners.map(\.tls) == [nil, nil])
        #expect(policy.listeners.map(\.proxyProtocol) == [false, false])
        #expect(policy.listen.map(\.description) == ["127.0.0.1:8080", "[::1]:8081"])
        #expect(policy.upstreams["api"]?.tls == nil)
    }

    @Test func listenerObjectReadsEveryTLSKeyWithPathsResolvedAgainstThePolicyFile() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        let policy = try directory.load(Self.policy(listen: Self.fullListener))
        #expect(
            policy.listen == [ListenAddress(host: "127.0.0.1", port: 8080), ListenAddress(host: "0.0.0.0", port: 8443)])
        let listener = policy.listeners[1]
        #expect(listener.proxyProtocol)
        let tls = try #require(listener.tls)
        let certs = directory.path + "/certs/"
        #expect(
            tls.defaultCertificate
                == PEMCertificateKeyPair(certificatePath: certs + "fullchain.pem", privateKeyPath: certs + "key.pem"))
        #expect(
            tls.serverNameCertificates == [
                .init(
                    serverNames: ["api.example.com", "*.example.org"],
                    certificate: PEMCertificateKeyPair(
                        certificatePath: certs + "api.pem", privateKeyPath: certs + "api-key.pem"))
            ])
        #expect(tls.clientCertificates == .init(caFile: certs + "clients-ca.pem", mode: .optional))
        #expect(tls.sessionTickets == .init(keyFile: certs + "ticket.key", rotation: .seconds(6 * 3600)))
        #expect(tls.handshakeTimeout == .seconds(5))
        #expect(tls.clientSubjectHeader == "X-Verified-Subject")
        #expect(policy.clientSubjectHeaderNames == ["X-Client-Cert-Subject", "X-Verified-Subject"])
        #expect(listener.description == "0.0.0.0:8443 (tls, proxy_protocol)")
    }

    @Test func tlsDefaults() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        let policy = try directory.load(
            Self.policy(
                listen:
                    "  - { address: \"0.0.0.0:8443\", tls: { certificate: certs/fullchain.pem, private_key: certs/key.pem } }"
            ))
        let tls = try #require(policy.listeners.first?.tls)
        #expect(tls.handshakeTimeout == .seconds(10))
        #expect(tls.clientSubjectHeader == "X-Client-Cert-Subject")
        #expect(tls.clientCertificates == nil && tls.sessionTickets == nil && tls.serverNameCertificates.isEmpty)
        #expect(policy.listeners.first?.proxyProtocol == false)
        #expect(policy.clientSubjectHeaderNames == ["X-Client-Cert-Subject"])
        #expect(ListenerTLSConfiguration.SessionTickets().rotation == .seconds(12 * 3600))
        // The mode defaults to required when client_certificates is given.
        let mtls = try directory.load(
            Self.policy(
                listen:
                    "  - { address: \"0.0.0.0:8443\", tls: { certificate: certs/fullchain.pem, private_key: certs/key.pem, client_certificates: { ca_file: certs/clients-ca.pem } } }"
            ))
        #expect(mtls.listeners.first?.tls?.clientCertificates?.mode == .required)
    }

    @Test func subjectHeaderWithoutClientCertificatesIsWarnedAbout() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        try directory.write(
            "policies.yaml",
            Self.policy(
                listen:
                    "  - { address: \"0.0.0.0:8443\", tls: { certificate: certs/fullchain.pem, private_key: certs/key.pem, client_subject_header: X-Subject } }"
            ))
        var warnings: [PolicyWarning] = []
        _ = try PolicyLoader.load(path: directory.path + "/policies.yaml", warnings: &warnings)
        let warning = try #require(warnings.first { $0.code == "setting_without_effect" })
        #expect(warning.field == "listen[0].tls.client_subject_header" && warning.line == 3)
        var none: [PolicyWarning] = []
        try directory.write("policies.yaml", Self.policy(listen: Self.fullListener))
        _ = try PolicyLoader.load(path: directory.path + "/policies.yaml", warnings: &none)
        #expect(!none.contains { $0.code == "setting_without_effect" })
    }

    @Test func proxyProtocolWithoutTLS() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        let policy = try directory.load(Self.policy(listen: "  - { address: \"0.0.0.0:8080\", proxy_protocol: true }"))
        #expect(
            policy.listeners == [
                ListenerConfiguration(address: .init(host: "0.0.0.0", port: 8080), proxyProtocol: true)
            ])
    }

    @Test func proxyProtocolWithoutTrustedProxiesIsWarnedAbout() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        let listen = "  - { address: \"0.0.0.0:8080\", proxy_protocol: true }"
        try directory.write("policies.yaml", Self.policy(listen: listen))
        var warnings: [PolicyWarning] = []
        _ = try PolicyLoader.load(path: directory.path + "/policies.yaml", warnings: &warnings)
        let warning = try #require(warnings.first { $0.code == "proxy_protocol_without_trusted_proxies" })
        #expect(warning.field == "listen[0].proxy_protocol" && warning.line == 3)
        // With the balancer's addresses listed, only they may send a header: no warning.
        try directory.write("policies.yaml", "trusted_proxies: [10.0.0.0/16]\n" + Self.policy(listen: listen))
        var none: [PolicyWarning] = []
        _ = try PolicyLoader.load(path: directory.path + "/policies.yaml", warnings: &none)
        #expect(!none.contains { $0.code == "proxy_protocol_without_trusted_proxies" })
    }

    @Test func aMissingFileNamesTheResolvedPathLineAndField() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        let text = Self.policy(listen: Self.fullListener).replacingOccurrences(
            of: "certs/key.pem", with: "certs/nope.pem")
        let error = try #require(directory.error(text))
        #expect(error.code == .tlsFileUnreadable)
        #expect(error.file == directory.path + "/policies.yaml")
        #expect(error.line == 8)
        #expect(error.field == "listen[1].tls.private_key")
        #expect(error.message.contains(directory.path + "/certs/nope.pem"))
        #expect(error.message.contains("relative to the policy file's directory"))
        #expect(error.message.contains("not found"))

        let absent = Self.policy(listen: Self.fullListener).replacingOccurrences(
            of: "ca_file: certs/clients-ca.pem", with: "ca_file: /nonexistent/ca.pem")
        let caError = try #require(directory.error(absent))
        #expect(caError.code == .tlsFileUnreadable && caError.field == "listen[1].tls.client_certificates.ca_file")

        let isDirectory = Self.policy(listen: Self.fullListener).replacingOccurrences(
            of: "certs/api.pem", with: "certs")
        let directoryError = try #require(directory.error(isDirectory))
        #expect(directoryError.field == "listen[1].tls.sni[0].certificate")
        #expect(directoryError.message.contains("is a directory"))
    }

    @Test func certificateAndKeyAreRequired() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        let error = try #require(
            directory.error(
                Self.policy(listen: "  - { address: \"0.0.0.0:8443\", tls: { certificate: certs/fullchain.pem } }")))
        #expect(error.code == .missingKey && error.field == "listen[0].tls.private_key")
        let noAddress = try #require(directory.error(Self.policy(listen: "  - { proxy_protocol: true }")))
        #expect(noAddress.code == .missingKey && noAddress.field == "listen[0].address")
    }

    @Test func valuesAreChecked() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        let base = Self.policy(listen: Self.fullListener)
        let cases: [(String, String, PolicyError.Code, String)] = [
            ("handshake_timeout: 5s", "handshake_timeout: 0", .invalidDuration, "listen[1].tls.handshake_timeout"),
            ("handshake_timeout: 5s", "handshake_timeout: 10m", .outOfRange, "listen[1].tls.handshake_timeout"),
            ("mode: optional", "mode: sometimes", .invalidValue, "listen[1].tls.client_certificates.mode"),
            ("rotation: 6h", "rotation: 10s", .outOfRange, "listen[1].tls.session_tickets.rotation"),
            ("proxy_protocol: true", "proxy_protocol: yes", .wrongType, "listen[1].proxy_protocol"),
            (
                "client_subject_header: X-Verified-Subject", "client_subject_header: X-Forwarded-For", .invalidValue,
                "listen[1].tls.client_subject_header"
            ),
            (
                "client_subject_header: X-Verified-Subject", "client_subject_header: X-App-Attest-Subject",
                .invalidValue,
                "listen[1].tls.client_subject_header"
            ),
            (
                "client_subject_header: X-Verified-Subject", "client_subject_header: \"X Subject\"", .invalidValue,
                "listen[1].tls.client_subject_header"
            ),
            // Issue 29: the gateway sets X-Real-IP to the client address itself.
            (
                "client_subject_header: X-Verified-Subject", "client_subject_header: x-real-ip", .invalidValue,
                "listen[1].tls.client_subject_header"
            ),
            ("\"*.Example.org\"", "\"*.org\"", .invalidValue, "listen[1].tls.sni[0].server_names[1]"),
            ("\"*.Example.org\"", "\"a.*.example.org\"", .invalidValue, "listen[1].tls.sni[0].server_names[1]"),
            ("\"*.Example.org\"", "API.example.com", .duplicateServerName, "listen[1].tls.sni[0].server_names[1]"),
            (
                "certificate: certs/fullchain.pem", "certificate: certs/fullchain.pem\n      ciphers: HIGH",
                .unknownKey, "listen[1].tls.ciphers"
            ),
        ]
        for (from, to, code, field) in cases {
            let error = try #require(directory.error(base.replacingOccurrences(of: from, with: to)), "\(to)")
            #expect(error.code == code, "\(to): \(error)")
            #expect(error.field == field, "\(to): \(error)")
        }
        let mode = try #require(
            directory.error(base.replacingOccurrences(of: "mode: optional", with: "mode: sometimes")))
        #expect(mode.message == "expected one of optional, required; found \"sometimes\"")
    }

    @Test func duplicateServerNamesAcrossEntriesAreRefused() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        let secondEntry = [
            "        - server_names: [other.example.com, api.example.com]",
            "          certificate: certs/api.pem",
            "          private_key: certs/api-key.pem",
            "      client_certificates:",
        ].joined(separator: "\n")
        let text = Self.policy(listen: Self.fullListener).replacingOccurrences(
            of: "      client_certificates:", with: secondEntry)
        let error = try #require(directory.error(text))
        #expect(error.code == .duplicateServerName)
        #expect(error.field == "listen[1].tls.sni[1].server_names[1]")
        #expect(error.message == "\"api.example.com\" is already listed at listen[1].tls.sni[0].server_names[0]")
    }

    @Test func sessionTicketKeyFileMustHoldWhole80ByteKeys() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        try directory.write("certs/ticket.key", String(repeating: "k", count: 48))
        let error = try #require(directory.error(Self.policy(listen: Self.fullListener)))
        #expect(error.code == .tlsFileUnreadable && error.field == "listen[1].tls.session_tickets.key_file")
        #expect(error.message.contains("holds 48 bytes; expected 1 to 16 keys of 80 bytes each"))
    }

    @Test func listenerObjectsCollideLikeAddresses() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        let error = try #require(
            directory.error(
                Self.policy(listen: "  - \"0.0.0.0:8443\"\n  - { address: \"127.0.0.1:8443\", proxy_protocol: true }")))
        #expect(error.code == .addressConflict && error.field == "listen[1]")
        let admin = try #require(
            directory.error(
                Self.policy(listen: "  - { address: \"0.0.0.0:9090\", proxy_protocol: true }")
                    + "admin_listen: \"127.0.0.1:9090\"\n"))
        #expect(admin.code == .addressConflict && admin.field == "admin_listen")
    }

    // MARK: - Upstreams

    @Test func httpsUpstreamDefaultsToPort443AndItsHostAsServerName() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        let policy = try directory.load(
            Self.policy(listen: "  - \"127.0.0.1:8080\"", upstream: "{ url: \"https://api.internal.example\" }"))
        let upstream = try #require(policy.upstreams["api"])
        #expect(upstream.host == "api.internal.example" && upstream.port == 443)
        #expect(upstream.tls == UpstreamTLSConfiguration(serverName: "api.internal.example"))
    }

    @Test func httpsUpstreamReadsCAClientCertificateAndServerName() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        let policy = try directory.load(
            Self.policy(
                listen: "  - \"127.0.0.1:8080\"",
                upstream: """
                    { url: "https://10.0.0.5:8443", ca_file: certs/upstream-ca.pem, client_certificate: certs/api.pem, client_private_key: certs/api-key.pem, server_name: API.internal }
                    """))
        let certs = directory.path + "/certs/"
        let upstream = try #require(policy.upstreams["api"])
        #expect(upstream.port == 8443)
        #expect(
            upstream.tls
                == UpstreamTLSConfiguration(
                    serverName: "api.internal",
                    caFile: certs + "upstream-ca.pem",
                    clientCertificate: PEMCertificateKeyPair(
                        certificatePath: certs + "api.pem", privateKeyPath: certs + "api-key.pem")))
        let summary = PolicySummary.render(policy)
        #expect(
            summary.contains(
                "api https://10.0.0.5:8443 max_connections=64 connect_timeout=5s response_timeout=1m server_name=api.internal ca_file=\(certs)upstream-ca.pem client_certificate=\(certs)api.pem"
            ), "\(summary)")
    }

    @Test func httpUpstreamRefusesTLSKeys() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        for key in ["ca_file: certs/upstream-ca.pem", "server_name: api", "client_certificate: certs/api.pem"] {
            let error = try #require(
                directory.error(
                    Self.policy(
                        listen: "  - \"127.0.0.1:8080\"", upstream: "{ url: \"http://127.0.0.1:9000\", \(key) }")))
            let name = String(key.prefix { $0 != ":" })
            #expect(error.code == .conflictingKeys)
            #expect(error.field == "upstreams.api.\(name)")
            #expect(error.line == 5)
            #expect(
                error.message
                    == "\(name) applies to https:// upstreams only; url is \"http://127.0.0.1:9000\" (plain HTTP)")
        }
    }

    @Test func upstreamClientCertificateNeedsItsKey() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        let error = try #require(
            directory.error(
                Self.policy(
                    listen: "  - \"127.0.0.1:8080\"",
                    upstream: "{ url: \"https://api\", client_certificate: certs/api.pem }")))
        #expect(error.code == .missingKey && error.field == "upstreams.api.client_private_key")
        let missingCA = try #require(
            directory.error(
                Self.policy(listen: "  - \"127.0.0.1:8080\"", upstream: "{ url: \"https://api\", ca_file: ca.pem }")))
        #expect(missingCA.code == .tlsFileUnreadable && missingCA.field == "upstreams.api.ca_file")
        #expect(missingCA.message.hasPrefix("upstream CA file \(directory.path)/ca.pem"))
    }

    // MARK: - Output and serving

    @Test func summaryShowsListenersAndTheirTLS() throws {
        let directory = try PolicyDirectory()
        defer { directory.remove() }
        let policy = try directory.load(Self.policy(listen: Self.fullListener))
        let summary = PolicySummary.render(policy)
        let certs = directory.path + "/certs/"
        #expect(summary.contains("listen                127.0.0.1:8080, 0.0.0.0:8443 (tls, proxy_protocol)\n"))
        #expect(
            summary.contains(
                "listen[1].tls certificate=\(certs)fullchain.pem private_key=\(certs)key.pem sni=api.example.com,*.example.org->\(certs)api.pem client_certificates=optional ca_file=\(certs)clients-ca.pem session_tickets.key_file=\(certs)ticket.key session_tickets.rotation=6h handshake_timeout=5s client_subject_header=X-Verified-Subject"
            ), "\(summary)")
    }
}
