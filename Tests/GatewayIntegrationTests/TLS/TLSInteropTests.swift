import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import GatewayIO

/// Real clients (curl, openssl s_client) against a TLSTransport server: a blocking accept on a
/// background thread (tests only), one connection each.
@Suite struct TLSInteropTests {
    let pki = TLSTestPKI.shared

    /// Serves one HTTP/1.1 request with a fixed body; returns "ok <protocol> <alpn>" or the error.
    static func serveOneRequest(_ context: TLSServerContext) -> @Sendable (Int32) -> String {
        { fd in
            do {
                let transport = try TLSTransport(fd: fd, server: context)
                defer { transport.close() }
                var request: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                while !request.ends(with: Array("\r\n\r\n".utf8)) {
                    let result = try buffer.withUnsafeMutableBytes {
                        try transport.read(into: $0.baseAddress!, count: $0.count)
                    }
                    switch result {
                    case .processed(let n): request.append(contentsOf: buffer[0..<n])
                    case .wouldBlock: continue
                    case .endOfFile: return "eof before request"
                    }
                }
                let response = Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".utf8)
                var written = 0
                while written < response.count {
                    let result = try response[written...].withUnsafeBytes {
                        try transport.write($0.baseAddress!, count: $0.count)
                    }
                    if case .processed(let n) = result { written += n }
                }
                let summary = "ok \(transport.negotiatedProtocol ?? "-") \(transport.negotiatedALPN ?? "-")"
                transport.shutdownOutput()
                return summary
            } catch {
                return "error \(error)"
            }
        }
    }

    @Test func curlSpeaksHTTP11OverTLS() throws {
        let context = try TLSServerContext(settings: TLSServerSettings(certificate: self.pki.ecdsa))
        let server = try TLSOneShotServer(serve: Self.serveOneRequest(context))
        let curl = try TLSTestPKI.run(
            "/usr/bin/curl",
            [
                "-sS", "--http1.1", "--cacert", self.pki.caCertificate, "--max-time", "10",
                "https://localhost:\(server.port)/",
            ])
        let outcome = server.wait()
        #expect(curl.status == 0, "\(curl.output)")
        #expect(curl.output == "hello")
        #expect(outcome == "ok TLSv1.3 http/1.1")
    }

    @Test func opensslClientWithTLS12GetsAModernCipher() throws {
        let context = try TLSServerContext(settings: TLSServerSettings(certificate: self.pki.ecdsa))
        let server = try TLSOneShotServer(serve: Self.serveOneRequest(context))
        let client = try TLSTestPKI.run(
            "/usr/bin/openssl",
            [
                "s_client", "-connect", "127.0.0.1:\(server.port)", "-servername", "localhost", "-tls1_2", "-alpn",
                "http/1.1", "-CAfile", self.pki.caCertificate, "-verify_return_error", "-quiet",
            ], input: "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        let outcome = server.wait()
        #expect(outcome == "ok TLSv1.2 http/1.1")
        #expect(client.output.contains("hello"), "\(client.output)")
    }

    @Test func tls12SessionIDResumesFromTheServerCache() throws {
        // No tickets (-no_ticket): the second connection can only resume from the server-side
        // session cache, by session ID.
        let context = try TLSServerContext(settings: TLSServerSettings(certificate: self.pki.ecdsa))
        let session = self.pki.path("s_client-session-\(UUID().uuidString).pem")
        var outputs: [String] = []
        for flag in ["-sess_out", "-sess_in"] {
            let server = try TLSOneShotServer(serve: Self.serveOneRequest(context))
            let client = try TLSTestPKI.run(
                "/usr/bin/openssl",
                [
                    "s_client", "-connect", "127.0.0.1:\(server.port)", "-servername", "localhost", "-tls1_2",
                    "-no_ticket", "-CAfile", self.pki.caCertificate, flag, session,
                ], input: "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            #expect(server.wait().hasPrefix("ok TLSv1.2"))
            outputs.append(client.output)
        }
        #expect(outputs[0].contains("New, TLSv1.2"), "\(outputs[0])")
        #expect(outputs[1].contains("Reused, TLSv1.2"), "\(outputs[1])")
    }

    /// RFC 8446 clients use a TLS 1.3 ticket once, so a resumed connection must bring a new one:
    /// without it, the client's next connection is a full handshake (wrk, like many clients,
    /// alternated between resumed and full handshakes against the gateway).
    @Test func tls13ResumptionIssuesAFreshTicketForTheNextConnection() throws {
        let context = try TLSServerContext(settings: TLSServerSettings(certificate: self.pki.ecdsa))
        let sessions = (0..<3).map { self.pki.path("s_client-tls13-\($0)-\(UUID().uuidString).pem") }
        var outputs: [String] = []
        for index in 0..<3 {
            var sessionFlags: [String] = []
            if index > 0 { sessionFlags += ["-sess_in", sessions[index - 1]] }
            sessionFlags += ["-sess_out", sessions[index]]
            let server = try TLSOneShotServer(serve: Self.serveOneRequest(context))
            // -ign_eof: read until the server closes, so the tickets sent after the handshake arrive.
            let client = try TLSTestPKI.run(
                "/usr/bin/openssl",
                [
                    "s_client", "-connect", "127.0.0.1:\(server.port)", "-servername", "localhost", "-tls1_3",
                    "-ign_eof", "-CAfile", self.pki.caCertificate,
                ] + sessionFlags, input: "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            #expect(server.wait().hasPrefix("ok TLSv1.3"))
            outputs.append(client.output)
        }
        #expect(outputs[0].contains("New, TLSv1.3"), "\(outputs[0])")
        #expect(outputs[1].contains("Reused, TLSv1.3"), "\(outputs[1])")
        #expect(outputs[2].contains("Reused, TLSv1.3"), "the ticket from the resumed connection resumes: \(outputs[2])")
        let first = try? String(contentsOfFile: sessions[0], encoding: .utf8)
        let second = try? String(contentsOfFile: sessions[1], encoding: .utf8)
        #expect(first != nil)
        #expect(second != nil, "the resumed connection received a ticket")
        #expect(first != second, "a new ticket, not the one just used")
    }

    @Test func tls11IsRefused() throws {
        let context = try TLSServerContext(settings: TLSServerSettings(certificate: self.pki.ecdsa))
        let server = try TLSOneShotServer(serve: Self.serveOneRequest(context))
        // SECLEVEL=0 and an empty config: make the client really offer TLS 1.1 (Debian's
        // openssl.cnf alone would stop it before the server is asked).
        let client = try TLSTestPKI.run(
            "/usr/bin/openssl",
            ["s_client", "-connect", "127.0.0.1:\(server.port)", "-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"],
            input: "", environment: ["OPENSSL_CONF": "/dev/null"])
        let outcome = server.wait()
        #expect(client.status != 0)
        #expect(outcome.hasPrefix("error TLS:"), "\(outcome)")
        #expect(outcome.contains("unsupported protocol"), "\(outcome)")
    }

    @Test func weakTLS12CipherIsRefused() throws {
        let context = try TLSServerContext(settings: TLSServerSettings(certificate: self.pki.ecdsa))
        let server = try TLSOneShotServer(serve: Self.serveOneRequest(context))
        let client = try TLSTestPKI.run(
            "/usr/bin/openssl",
            [
                "s_client", "-connect", "127.0.0.1:\(server.port)", "-tls1_2", "-cipher",
                "ECDHE-ECDSA-AES128-SHA:@SECLEVEL=0",
            ],
            input: "", environment: ["OPENSSL_CONF": "/dev/null"])
        let outcome = server.wait()
        #expect(client.status != 0)
        #expect(outcome.contains("no shared cipher"), "\(outcome)")
    }
}

extension Array where Element: Equatable {
    fileprivate func ends(with suffix: [Element]) -> Bool {
        self.count >= suffix.count && Array(self[(self.count - suffix.count)...]) == suffix
    }
}
