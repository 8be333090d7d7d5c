import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import GatewayIO
@testable import HTTPProxy
@testable import PolicyModel

/// mTLS on a listener (`tls.client_certificates`), with curl and openssl s_client presenting
/// the test PKI's client certificate: the verified subject reaches the upstream in the
/// listener's header, a client's copy of any subject header never does.
@Suite(.serialized) struct ClientCertificateTests {
    static let subjectHeader = "X-Verified-Subject"

    private static func gateway(
        mode: TLSClientAuthentication.Mode, upstream: UpstreamProcess, subjectHeader: String = Self.subjectHeader
    ) throws -> TestGateway {
        let pki = TLSTestPKI.shared
        let context = try TLSServerContext(
            settings: TLSServerSettings(
                certificate: pki.ecdsa,
                clientAuthentication: TLSClientAuthentication(caFilePath: pki.caCertificate, mode: mode)))
        return try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1,
            tls: ListenerTLS(context: context, handshakeTimeout: .seconds(5), clientSubjectHeader: subjectHeader),
            clientSubjectHeaders: [ListenerTLSConfiguration.defaultClientSubjectHeader, subjectHeader])
    }

    private static func curl(_ port: UInt16, _ arguments: [String]) throws -> (status: Int32, output: String) {
        try TLSTestPKI.run(
            "/usr/bin/curl",
            [
                "--silent", "--show-error", "--http1.1", "--max-time", "5", "--cacert", TLSTestPKI.shared.caCertificate,
                "-H", "X-Verified-Subject: CN=spoofed", "-H", "x-client-cert-subject: CN=spoofed",
            ] + arguments + ["https://localhost:\(port)/mtls"])
    }

    private static func headers(_ output: String) throws -> [[String]] {
        let echo = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        return try #require(echo["headers"] as? [[String]])
    }

    @Test func theVerifiedSubjectArrivesUpstreamAndSpoofedCopiesDoNot() throws {
        let upstream = try UpstreamProcess()
        let gateway = try Self.gateway(mode: .required, upstream: upstream)
        defer { gateway.stop() }
        let client = TLSTestPKI.shared.client
        let (status, output) = try Self.curl(
            gateway.port, ["--cert", client.certificateChainPath, "--key", client.privateKeyPath])
        #expect(status == 0, "\(output)")
        let headers = try Self.headers(output)
        let subjects = headers.filter { $0[0].lowercased() == "x-verified-subject" }
        #expect(subjects == [["X-Verified-Subject", "CN=app-client,O=Attest Test"]], "\(headers)")
        #expect(!headers.contains { $0[0].lowercased() == "x-client-cert-subject" }, "\(headers)")
    }

    /// Issue 29: a subject header named like nginx's (`X-SSL-Client-S-DN`, one of the headers
    /// other proxies set) carries the verified subject and nothing a client sent.
    @Test func aSubjectHeaderNamedLikeNginxsCarriesOnlyTheVerifiedSubject() throws {
        let upstream = try UpstreamProcess()
        let gateway = try Self.gateway(mode: .required, upstream: upstream, subjectHeader: "X-SSL-Client-S-DN")
        defer { gateway.stop() }
        let client = TLSTestPKI.shared.client
        let (status, output) = try Self.curl(
            gateway.port,
            [
                "-H", "x-ssl-client-s-dn: CN=spoofed", "-H", "X-SSL-Client-Verify: SUCCESS", "--cert",
                client.certificateChainPath, "--key", client.privateKeyPath,
            ])
        #expect(status == 0, "\(output)")
        let headers = try Self.headers(output)
        let ssl = headers.filter { $0[0].lowercased().hasPrefix("x-ssl-client-") }
        #expect(ssl == [["X-SSL-Client-S-DN", "CN=app-client,O=Attest Test"]], "\(headers)")
    }

    @Test func openSSLClientWithACertificateIsServedToo() throws {
        let upstream = try UpstreamProcess()
        let gateway = try Self.gateway(mode: .required, upstream: upstream)
        defer { gateway.stop() }
        let pki = TLSTestPKI.shared
        let (status, output) = try TLSTestPKI.run(
            "/usr/bin/openssl",
            [
                "s_client", "-connect", "127.0.0.1:\(gateway.port)", "-servername", "localhost", "-CAfile",
                pki.caCertificate, "-cert", pki.client.certificateChainPath, "-key", pki.client.privateKeyPath,
                "-quiet", "-ign_eof",
            ],
            input: "GET /s HTTP/1.1\r\nHost: localhost\r\nX-Verified-Subject: CN=spoofed\r\nConnection: close\r\n\r\n")
        #expect(status == 0, "\(output)")
        #expect(output.contains(#"["X-Verified-Subject", "CN=app-client,O=Attest Test"]"#), "\(output)")
        #expect(!output.contains("CN=spoofed"), "\(output)")
    }

    /// The server sends the chain from its certificate file, nothing more: OpenSSL's automatic
    /// chain building (off: SSL_MODE_NO_AUTO_CHAIN) would append the CA it finds in the client CA
    /// file, a chain the operator never configured, and build it again on every handshake.
    @Test func theServerSendsOnlyTheConfiguredChain() throws {
        let upstream = try UpstreamProcess()
        let gateway = try Self.gateway(mode: .optional, upstream: upstream)
        defer { gateway.stop() }
        let pki = TLSTestPKI.shared
        let (status, output) = try TLSTestPKI.run(
            "/usr/bin/openssl",
            [
                "s_client", "-connect", "127.0.0.1:\(gateway.port)", "-servername", "localhost", "-CAfile",
                pki.caCertificate, "-showcerts",
            ],
            input: "")
        #expect(status == 0, "\(output)")
        let sent = output.components(separatedBy: "-----BEGIN CERTIFICATE-----").count - 1
        #expect(sent == 1, "the leaf-only certificate file gave \(sent) certificates: \(output)")
        #expect(output.contains("Verify return code: 0"), "\(output)")
    }

    @Test func noCertificateOnARequiredListenerFailsTheHandshake() throws {
        let upstream = try UpstreamProcess()
        let gateway = try Self.gateway(mode: .required, upstream: upstream)
        defer { gateway.stop() }
        let (status, output) = try Self.curl(gateway.port, [])
        #expect(status != 0, "\(output)")
        #expect(!output.contains("\"headers\""), "the upstream must not be reached: \(output)")
        #expect(
            eventually {
                gateway.metrics.render().contains(
                    #"attest_gateway_tls_handshake_failures_total{reason="client_certificate"} 1"#)
            }, "\(gateway.metrics.render())")
    }

    @Test func aCertificateFromAnotherCAFailsTheHandshake() throws {
        let upstream = try UpstreamProcess()
        let gateway = try Self.gateway(mode: .optional, upstream: upstream)
        defer { gateway.stop() }
        let other = TLSTestPKI.shared.unknownCA
        let (status, output) = try Self.curl(
            gateway.port, ["--cert", other.certificateChainPath, "--key", other.privateKeyPath])
        #expect(status != 0, "\(output)")
        #expect(!output.contains("\"headers\""), "\(output)")
    }

    @Test func optionalWithoutACertificateSendsNoSubject() throws {
        let upstream = try UpstreamProcess()
        let gateway = try Self.gateway(mode: .optional, upstream: upstream)
        defer { gateway.stop() }
        let (status, output) = try Self.curl(gateway.port, [])
        #expect(status == 0, "\(output)")
        let headers = try Self.headers(output)
        #expect(!headers.contains { $0[0].lowercased() == "x-verified-subject" }, "\(headers)")
        #expect(!headers.contains { $0[0].lowercased() == "x-client-cert-subject" }, "\(headers)")
    }

    @Test func aPlainListenerStripsSubjectHeadersToo() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], loops: 1,
            clientSubjectHeaders: [ListenerTLSConfiguration.defaultClientSubjectHeader, Self.subjectHeader])
        defer { gateway.stop() }
        let response = try TestHTTPClient.request(
            port: gateway.port,
            "GET / HTTP/1.1\r\nHost: h\r\nX-Client-Cert-Subject: CN=spoofed\r\nx-verified-subject: CN=spoofed\r\n\r\n")
        #expect(response.status == 200)
        let names = try response.echoedHeaders().map { $0.0.lowercased() }
        #expect(!names.contains("x-client-cert-subject") && !names.contains("x-verified-subject"), "\(names)")
    }
}
