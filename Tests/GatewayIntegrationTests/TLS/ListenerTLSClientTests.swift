import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import GatewayIO
@testable import HTTPProxy

/// More real clients and hostile peers against a TLS listener served by the proxy in-process
/// (`ListenerTLSTests` has curl, plain HTTP, a silent client, a truncated ClientHello):
/// `openssl s_client` and Python's `ssl` getting a response, weak ciphers refused by the
/// server (not by the client's own configuration), SNI chosen per name with curl verifying it,
/// garbage and a slow ClientHello closed with the open-connection gauge back to 0.
@Suite(.serialized) struct ListenerTLSClientTests {
    private static func listenerTLS(
        handshakeTimeout: Duration = .seconds(5), _ configure: (inout TLSServerSettings) -> Void = { _ in }
    ) throws -> ListenerTLS {
        var settings = TLSServerSettings(certificate: TLSTestPKI.shared.ecdsa)
        configure(&settings)
        return ListenerTLS(context: try TLSServerContext(settings: settings), handshakeTimeout: handshakeTimeout)
    }

    private static func gateway(_ tls: ListenerTLS) throws -> (TestGateway, UpstreamProcess) {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, tls: tls)
        return (gateway, upstream)
    }

    private static func handshakeFailures(_ gateway: TestGateway, _ reason: String) -> Int {
        let prefix = #"attest_gateway_tls_handshake_failures_total{reason="\#(reason)"} "#
        let line = gateway.metrics.render().split(separator: "\n").first { $0.hasPrefix(prefix) }
        return line.flatMap { Int($0.dropFirst(prefix.count)) } ?? 0
    }

    /// No connection left behind: the server's count and the exported gauge are both 0.
    private static func expectNoOpenConnections(
        _ gateway: TestGateway, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(eventually { gateway.server.openConnections == 0 }, sourceLocation: sourceLocation)
        #expect(
            gateway.metrics.render().split(separator: "\n").contains("attest_gateway_active_connections 0"),
            "\(gateway.metrics.render())", sourceLocation: sourceLocation)
    }

    private static func handshakes(_ gateway: TestGateway, _ version: String, resumed: Bool) -> Int {
        let prefix = #"attest_gateway_tls_handshakes_total{protocol="\#(version)",resumed="\#(resumed)"} "#
        let line = gateway.metrics.render().split(separator: "\n").first { $0.hasPrefix(prefix) }
        return line.flatMap { Int($0.dropFirst(prefix.count)) } ?? -1
    }

    // MARK: - Real clients

    /// Each finished handshake is counted by protocol and resumption; a TLS 1.3 client resuming
    /// twice in a row (each time with the ticket from the connection before) resumes both times.
    @Test func handshakesAreCountedByProtocolAndResumption() throws {
        let (gateway, upstream) = try Self.gateway(try Self.listenerTLS())
        defer { gateway.stop() }
        _ = upstream
        let sessions = (0..<3).map { TLSTestPKI.shared.path("listener-session-\($0)-\(UUID().uuidString).pem") }
        func connect(_ version: String, sessionIn: String?, sessionOut: String) throws -> String {
            var arguments = [
                "s_client", "-connect", "127.0.0.1:\(gateway.port)", "-servername", "localhost", version,
                "-CAfile", TLSTestPKI.shared.caCertificate, "-ign_eof", "-sess_out", sessionOut,
            ]
            if let sessionIn { arguments += ["-sess_in", sessionIn] }
            let client = try TLSTestPKI.run(
                "/usr/bin/openssl", arguments,
                input: "GET /count HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            #expect(client.output.contains("HTTP/1.1 200"), "\(client.output)")
            return client.output
        }
        let first = try connect("-tls1_3", sessionIn: nil, sessionOut: sessions[0])
        let second = try connect("-tls1_3", sessionIn: sessions[0], sessionOut: sessions[1])
        let third = try connect("-tls1_3", sessionIn: sessions[1], sessionOut: sessions[2])
        let tls12Session = TLSTestPKI.shared.path("listener-tls12-\(UUID().uuidString).pem")
        _ = try connect("-tls1_2", sessionIn: nil, sessionOut: tls12Session)
        #expect(first.contains("New, TLSv1.3"), "\(first)")
        #expect(second.contains("Reused, TLSv1.3"), "\(second)")
        #expect(third.contains("Reused, TLSv1.3"), "\(third)")
        #expect(eventually { Self.handshakes(gateway, "TLSv1.3", resumed: true) == 2 }, "\(gateway.metrics.render())")
        #expect(Self.handshakes(gateway, "TLSv1.3", resumed: false) == 1)
        #expect(Self.handshakes(gateway, "TLSv1.2", resumed: false) == 1)
        #expect(Self.handshakes(gateway, "TLSv1.2", resumed: true) == 0)
        #expect(Self.handshakeFailures(gateway, "error") == 0)
    }

    @Test(arguments: ["-tls1_2", "-tls1_3"])
    func opensslClientGetsTheUpstreamsResponse(version: String) throws {
        let (gateway, upstream) = try Self.gateway(try Self.listenerTLS())
        defer { gateway.stop() }
        _ = upstream
        let client = try TLSTestPKI.run(
            "/usr/bin/openssl",
            [
                "s_client", "-connect", "127.0.0.1:\(gateway.port)", "-servername", "localhost", version, "-alpn",
                "http/1.1", "-CAfile", TLSTestPKI.shared.caCertificate, "-verify_return_error", "-brief", "-ign_eof",
            ], input: "GET /s_client HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        #expect(client.status == 0, "\(client.output)")
        #expect(client.output.contains("Verification: OK"), "\(client.output)")
        #expect(client.output.contains("HTTP/1.1 200"), "\(client.output)")
        #expect(client.output.contains(#""target": "/s_client""#), "\(client.output)")
        if version == "-tls1_2" {
            #expect(client.output.contains("Protocol version: TLSv1.2"), "\(client.output)")
            #expect(client.output.contains("Ciphersuite: ECDHE-ECDSA-AES"), "\(client.output)")
        } else {
            #expect(client.output.contains("Protocol version: TLSv1.3"), "\(client.output)")
        }
    }

    @Test func pythonSSLClientGetsTheUpstreamsResponse() throws {
        let (gateway, upstream) = try Self.gateway(try Self.listenerTLS())
        defer { gateway.stop() }
        _ = upstream
        let script = """
            import http.client, ssl, sys
            context = ssl.create_default_context(cafile=sys.argv[2])
            connection = http.client.HTTPSConnection("localhost", int(sys.argv[1]), context=context, timeout=5)
            for path in ("/python/1", "/python/2"):
                connection.request("GET", path)
                response = connection.getresponse()
                body = response.read().decode()
                print(response.status, connection.sock.version(), connection.sock.selected_alpn_protocol(), path in body)
            """
        let run = try TLSTestPKI.run(
            "/usr/bin/python3", ["-c", script, String(gateway.port), TLSTestPKI.shared.caCertificate])
        #expect(run.status == 0, "\(run.output)")
        // Two requests, one connection (keep-alive over TLS); Python offers no ALPN by default.
        #expect(run.output == "200 TLSv1.3 None True\n200 TLSv1.3 None True\n", "\(run.output)")
    }

    /// The client is told to offer only the given cipher, with its own floor removed
    /// (`OPENSSL_CONF=/dev/null`, `@SECLEVEL=0`), so the refusal is the server's: the
    /// handshake-failure counter must move. The last case is the control: a cipher of the
    /// gateway's list is accepted by the same command.
    @Test(arguments: [
        ("-tls1_2", "AES128-SHA", false),  // static RSA key exchange, CBC, SHA-1
        ("-tls1_2", "ECDHE-ECDSA-AES128-SHA", false),  // CBC with SHA-1 MAC
        ("-tls1_2", "ECDHE-ECDSA-AES256-SHA384", false),  // CBC
        ("-tls1_2", "ECDHE-ECDSA-NULL-SHA", false),  // no encryption
        ("-tls1_1", "DEFAULT", false),  // TLS 1.1
        ("-tls1", "DEFAULT", false),  // TLS 1.0
        ("-tls1_2", "ECDHE-ECDSA-AES128-GCM-SHA256", true),  // control: in the gateway's list
    ])
    func weakProtocolsAndCiphersAreRefusedByTheServer(version: String, cipher: String, accepted: Bool) throws {
        let (gateway, upstream) = try Self.gateway(try Self.listenerTLS())
        defer { gateway.stop() }
        _ = upstream
        let client = try TLSTestPKI.run(
            "/usr/bin/openssl",
            [
                "s_client", "-connect", "127.0.0.1:\(gateway.port)", version, "-cipher", "\(cipher):@SECLEVEL=0",
                "-brief", "-ign_eof",
            ],
            input: "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
            environment: ["OPENSSL_CONF": "/dev/null"])
        if accepted {
            #expect(client.status == 0, "\(client.output)")
            #expect(client.output.contains("Ciphersuite: \(cipher)"), "\(client.output)")
            #expect(Self.handshakeFailures(gateway, "error") == 0)
        } else {
            #expect(client.status != 0, "\(client.output)")
            #expect(!client.output.contains("HTTP/1.1"), "\(client.output)")
            // The ClientHello reached the server, which refused it.
            #expect(eventually { Self.handshakeFailures(gateway, "error") == 1 }, "\(client.output)")
        }
        Self.expectNoOpenConnections(gateway)
    }

    /// The server's order decides (AES-128-GCM before AES-256-GCM), except that a client
    /// listing ChaCha20-Poly1305 first (no AES hardware) gets it.
    @Test(arguments: [
        ("-ciphersuites", "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"),
        ("-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256", "TLS_CHACHA20_POLY1305_SHA256"),
        ("-cipher", "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"),
        ("-cipher", "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"),
    ])
    func serverCipherOrderWithChaChaForClientsThatPreferIt(option: String, offered: String, chosen: String) throws {
        let (gateway, upstream) = try Self.gateway(try Self.listenerTLS())
        defer { gateway.stop() }
        _ = upstream
        let version = option == "-cipher" ? "-tls1_2" : "-tls1_3"
        let client = try TLSTestPKI.run(
            "/usr/bin/openssl",
            ["s_client", "-connect", "127.0.0.1:\(gateway.port)", version, option, offered, "-brief"], input: "")
        #expect(client.output.contains("Ciphersuite: \(chosen)\n"), "\(client.output)")
    }

    // MARK: - SNI

    @Test func sniPicksTheCertificateForEachNameAndCurlVerifiesIt() throws {
        let pki = TLSTestPKI.shared
        let tls = try Self.listenerTLS {
            $0.serverNameCertificates = [
                TLSServerNameCertificate(serverNames: ["rsa.test"], files: pki.rsa),
                TLSServerNameCertificate(serverNames: ["*.wild.test"], files: pki.wildcard),
            ]
        }
        let (gateway, upstream) = try Self.gateway(tls)
        defer { gateway.stop() }
        _ = upstream
        func curl(_ host: String) throws -> (status: Int32, output: String) {
            try TLSTestPKI.run(
                "/usr/bin/curl",
                [
                    "-sS", "-v", "--http1.1", "--max-time", "5", "--cacert", pki.caCertificate, "--resolve",
                    "\(host):\(gateway.port):127.0.0.1", "--write-out", "\\n%{http_code}\\n",
                    "https://\(host):\(gateway.port)/sni",
                ])
        }
        // curl verifies chain and host name: each name must get its own certificate.
        for (host, subject) in [
            ("rsa.test", "CN=rsa.test"), ("api.wild.test", "CN=*.wild.test"), ("localhost", "CN=default.test"),
        ] {
            let run = try curl(host)
            #expect(run.status == 0, "\(host): \(run.output)")
            #expect(run.output.contains("\n200\n"), "\(host): \(run.output)")
            #expect(run.output.contains("subject: \(subject)"), "\(host): \(run.output)")
        }
        // An unknown name gets the default certificate, which is not valid for it.
        let unknown = try curl("unknown.test")
        #expect(unknown.status != 0, "\(unknown.output)")
        #expect(unknown.output.contains("subject: CN=default.test"), "\(unknown.output)")
    }

    // MARK: - Hostile handshakes

    @Test func binaryGarbageIsClosedAsAFailedHandshakeAtOnce() throws {
        let (gateway, upstream) = try Self.gateway(try Self.listenerTLS(handshakeTimeout: .seconds(5)))
        defer { gateway.stop() }
        _ = upstream
        let client = try TestHTTPClient(port: gateway.port)
        var generator = SystemRandomNumberGenerator()
        // A byte that is not a TLS content type first, then noise.
        let garbage = [0xFF] + (0..<300).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let started = ContinuousClock.now
        try client.send(garbage)
        #expect(client.waitForClose(), "the connection must be closed")
        #expect(ContinuousClock.now - started < .seconds(2), "refused at once, not at the 5 s timeout")
        #expect(eventually { Self.handshakeFailures(gateway, "error") == 1 })
        #expect(Self.handshakeFailures(gateway, "timeout") == 0)
        Self.expectNoOpenConnections(gateway)
    }

    /// A real ClientHello sent one byte every 50 ms: every read brings progress, so only a
    /// timer over the whole handshake (not an idle timer) closes it. Closed at the timeout, not
    /// before, and nothing is left open.
    @Test func slowClientHelloIsClosedAtTheHandshakeTimeout() throws {
        let (gateway, upstream) = try Self.gateway(try Self.listenerTLS(handshakeTimeout: .seconds(1)))
        defer { gateway.stop() }
        _ = upstream
        let hello = try Self.clientHello()
        #expect(hello.count > 100 && hello[0] == 0x16, "\(hello.count) bytes")
        let client = try TestHTTPClient(port: gateway.port, timeoutSeconds: 10)
        let started = ContinuousClock.now
        var sent = 0
        var closedEarly = false
        while sent < hello.count - 1, ContinuousClock.now - started < .seconds(4) {
            let n = Glibc.send(client.fd, [hello[sent]], 1, Int32(MSG_NOSIGNAL))
            if n != 1 {
                closedEarly = ContinuousClock.now - started < .milliseconds(900)
                break
            }
            sent += 1
            usleep(50_000)
        }
        #expect(!closedEarly, "closed before the handshake timeout")
        #expect(client.waitForClose(), "the connection must be closed")
        let elapsed = ContinuousClock.now - started
        #expect(elapsed >= .milliseconds(900) && elapsed < .seconds(3), "closed after \(elapsed)")
        #expect(sent < hello.count - 1, "the whole ClientHello went out: no timeout fired")
        #expect(eventually { Self.handshakeFailures(gateway, "timeout") == 1 })
        Self.expectNoOpenConnections(gateway)
        // The listener still serves real clients.
        let (status, output) = try TLSTestPKI.run(
            "/usr/bin/curl",
            [
                "-sS", "--http1.1", "--max-time", "5", "--cacert", TLSTestPKI.shared.caCertificate,
                "https://localhost:\(gateway.port)/after",
            ])
        #expect(status == 0, "\(output)")
    }

    @Test func manyTruncatedClientHellosLeaveNoConnectionOpen() throws {
        let (gateway, upstream) = try Self.gateway(try Self.listenerTLS(handshakeTimeout: .milliseconds(500)))
        defer { gateway.stop() }
        _ = upstream
        let hello = try Self.clientHello()
        let clients = try (0..<20).map { index in
            let client = try TestHTTPClient(port: gateway.port)
            // Cut anywhere inside the ClientHello: the record header, the handshake header, the body.
            try client.send(Array(hello.prefix(1 + index * (hello.count - 2) / 19)))
            return client
        }
        for client in clients { #expect(client.waitForClose()) }
        #expect(eventually { Self.handshakeFailures(gateway, "timeout") == 20 }, "\(gateway.metrics.render())")
        Self.expectNoOpenConnections(gateway)
    }

    /// A TLS 1.3 ClientHello for localhost from Python's ssl (memory BIOs: nothing is sent).
    private static func clientHello() throws -> [UInt8] {
        let script = """
            import ssl, sys
            incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="localhost")
            try:
                tls.do_handshake()
            except ssl.SSLWantReadError:
                pass
            sys.stdout.write(outgoing.read().hex())
            """
        let run = try TLSTestPKI.run("/usr/bin/python3", ["-c", script])
        guard run.status == 0, run.output.count % 2 == 0 else { throw TestFailure("python: \(run.output)") }
        var bytes: [UInt8] = []
        var index = run.output.startIndex
        while index < run.output.endIndex {
            let next = run.output.index(index, offsetBy: 2)
            guard let byte = UInt8(run.output[index..<next], radix: 16) else { throw TestFailure("hex: \(run.output)") }
            bytes.append(byte)
            index = next
        }
        return bytes
    }
}
