import Foundation
import GatewayTesting
import Glibc
import Testing

extension EndToEnd {
    /// The built binary's client edge from its policy: a `proxy_protocol: true` listener behind
    /// a (simulated) L4 balancer with `trusted_proxies`, and an mTLS listener reached with curl
    /// and a client certificate.
    @Suite struct EdgeListener {
        /// Sends `header` then an HTTP request carrying a spoofed X-Forwarded-For on one
        /// connection (Python: the balancer writes the header in front of the client's bytes);
        /// prints the response, or nothing when the gateway closed without one.
        static func proxied(port: UInt16, header: [UInt8], in world: E2EWorld) throws -> ToolRun {
            let bytes = header.map { String(format: "\\x%02x", $0) }.joined()
            let script = """
                import socket, sys
                s = socket.create_connection(("127.0.0.1", \(port)), timeout=5)
                s.sendall(b"\(bytes)")
                s.sendall(b"GET /public/edge HTTP/1.1\\r\\nHost: api.example\\r\\nX-Forwarded-For: 6.6.6.6\\r\\nConnection: close\\r\\n\\r\\n")
                data = b""
                try:
                    while True:
                        chunk = s.recv(65536)
                        if not chunk: break
                        data += chunk
                except ConnectionResetError:
                    pass
                sys.stdout.write(data.decode())
                """
            return try ToolRun.run(try E2EPaths.executable("python3"), ["-c", script], in: world.directory)
        }

        /// PROXY v2, TCP over IPv4, from `source`:40000 to 192.0.2.1:443.
        static func v2Header(source: [UInt8]) -> [UInt8] {
            let signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
            return signature + [0x21, 0x11, 0x00, 12] + source + [192, 0, 2, 1, 0x9C, 0x40, 0x01, 0xBB]
        }

        @Test(.timeLimit(.minutes(1)))
        func proxyProtocolFromATrustedBalancerNamesTheClient() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try GatewayInstance.start("pp", in: world.directory) { ports in
                world.policy(ports: ports, extra: "trusted_proxies: [127.0.0.1/32]", routes: TestRoutes.standard)
                    .replacingOccurrences(
                        of: "listen: 127.0.0.1:\(ports.proxy)\n",
                        with: "listen:\n  - { address: \"127.0.0.1:\(ports.proxy)\", proxy_protocol: true }\n")
            }
            defer { gateway.kill() }
            #expect(gateway.logEvents("listening").contains { $0["proxy_protocol"] as? String == "on" })

            let run = try Self.proxied(
                port: gateway.ports.proxy, header: Self.v2Header(source: [203, 0, 113, 7]), in: world)
            #expect(run.stdout.hasPrefix("HTTP/1.1 200"), "\(run.stdout) \(run.stderr)")
            // The client's own X-Forwarded-For is replaced: 203.0.113.7 is no trusted proxy.
            #expect(run.stdout.contains(#"["X-Forwarded-For", "203.0.113.7"]"#), "\(run.stdout)")
            #expect(!run.stdout.contains("6.6.6.6"), "\(run.stdout)")
            #expect(
                eventually(timeout: .seconds(5)) {
                    gateway.accessLog.contains { $0["client"] as? String == "203.0.113.7" }
                }, "\(gateway.child.stdout)")
        }

        @Test(.timeLimit(.minutes(1)))
        func aRequestWithoutProxyHeaderIsRefusedAndCounted() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try GatewayInstance.start("pp-refuse", in: world.directory) { ports in
                world.policy(ports: ports, routes: TestRoutes.standard).replacingOccurrences(
                    of: "listen: 127.0.0.1:\(ports.proxy)\n",
                    with: "listen:\n  - { address: \"127.0.0.1:\(ports.proxy)\", proxy_protocol: true }\n")
            }
            defer { gateway.kill() }
            let run = try Self.proxied(port: gateway.ports.proxy, header: [], in: world)
            #expect(run.stdout.isEmpty, "no answer without a PROXY header: \(run.stdout)")
            #expect(
                eventually(timeout: .seconds(5)) {
                    (try? gateway.metrics())?[
                        #"attest_gateway_proxy_protocol_refusals_total{reason="not_proxy_protocol"}"#] == 1
                })
            #expect(
                eventually(timeout: .seconds(5)) {
                    gateway.logEvents("proxy_protocol_refused").contains {
                        $0["reason"] as? String == "not_proxy_protocol"
                    }
                })
        }

        /// A CA, a server certificate for localhost and a client certificate under it, in the world.
        static func mtlsPKI(in world: E2EWorld) throws {
            let d = world.directory.path
            let steps: [[String]] = [
                ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "\(d)/ca.key"],
                [
                    "req", "-x509", "-new", "-key", "\(d)/ca.key", "-subj", "/CN=E2E Client CA", "-days", "2",
                    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
                    "-out", "\(d)/ca.pem",
                ],
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                    "\(d)/server.key", "-out", "\(d)/server.pem", "-days", "2", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1",
                ],
                ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "\(d)/client.key"],
                ["req", "-new", "-key", "\(d)/client.key", "-subj", "/O=E2E/CN=device-42", "-out", "\(d)/client.csr"],
                [
                    "x509", "-req", "-in", "\(d)/client.csr", "-CA", "\(d)/ca.pem", "-CAkey", "\(d)/ca.key",
                    "-CAcreateserial", "-days", "2", "-out", "\(d)/client.pem",
                ],
            ]
            for step in steps {
                let run = try ToolRun.run("/usr/bin/openssl", step, in: world.directory)
                guard run.status == 0 else { throw E2EError("openssl \(step.first ?? "") failed: \(run.stderr)") }
            }
        }

        static func curl(port: UInt16, world: E2EWorld, certificate: Bool) throws -> ToolRun {
            let d = world.directory.path
            let client = certificate ? ["--cert", "\(d)/client.pem", "--key", "\(d)/client.key"] : []
            return try ToolRun.run(
                "/usr/bin/curl",
                [
                    "--silent", "--show-error", "--http1.1", "--max-time", "5", "--cacert", "\(d)/server.pem",
                    "-H", "X-Device-Subject: CN=spoofed", "-H", "X-Client-Cert-Subject: CN=spoofed",
                ] + client + ["https://localhost:\(port)/public/mtls"], in: world.directory)
        }

        @Test(.timeLimit(.minutes(1)))
        func mtlsPassesTheVerifiedSubjectAndNeverTheClientsCopy() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            try Self.mtlsPKI(in: world)
            let gateway = try GatewayInstance.start("mtls", in: world.directory) { ports in
                world.policy(ports: ports, routes: TestRoutes.standard).replacingOccurrences(
                    of: "listen: 127.0.0.1:\(ports.proxy)\n",
                    with: """
                        listen:
                          - address: 127.0.0.1:\(ports.proxy)
                            tls:
                              certificate: server.pem
                              private_key: server.key
                              client_certificates: { ca_file: ca.pem, mode: required }
                              client_subject_header: X-Device-Subject

                        """)
            }
            defer { gateway.kill() }
            #expect(gateway.logEvents("listening").contains { $0["tls"] as? String == "mtls" })

            let run = try Self.curl(port: gateway.ports.proxy, world: world, certificate: true)
            #expect(run.status == 0, "\(run.stderr)")
            let echo = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
            let headers = try #require(echo["headers"] as? [[String]])
            let subjects = headers.filter {
                ["x-device-subject", "x-client-cert-subject"].contains($0[0].lowercased())
            }
            #expect(subjects == [["X-Device-Subject", "CN=device-42,O=E2E"]], "\(headers)")

            // Without a certificate the handshake fails and nothing reaches the upstream.
            let refused = try Self.curl(port: gateway.ports.proxy, world: world, certificate: false)
            #expect(refused.status != 0, "\(refused.stdout)")
            #expect(!refused.stdout.contains("headers"), "\(refused.stdout)")
            #expect(
                eventually(timeout: .seconds(5)) {
                    (try? gateway.metrics())?[
                        #"attest_gateway_tls_handshake_failures_total{reason="client_certificate"}"#] == 1
                })
        }
    }
}
