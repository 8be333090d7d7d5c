import Foundation
import Glibc
import Testing

extension EndToEnd {
    /// The built binary terminating TLS from its policy (`listen: [{address, tls}]`), reached
    /// with curl; SIGHUP picks up a renewed certificate, and a bad one keeps the running one.
    @Suite struct TLSListener {
        /// A self-signed ECDSA P-256 certificate for localhost / 127.0.0.1, written as
        /// `<name>.pem` and `<name>.key` in `directory`.
        static func certificate(_ name: String, in world: E2EWorld, subject: String) throws {
            let directory = world.directory.path
            let run = try ToolRun.run(
                "/usr/bin/openssl",
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", "\(directory)/\(name).key", "-out", "\(directory)/\(name).pem", "-days", "2",
                    "-subj", "/CN=\(subject)", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                ], in: world.directory)
            guard run.status == 0 else { throw E2EError("openssl req failed: \(run.stderr)") }
        }

        static func curl(port: UInt16, caFile: String, in world: E2EWorld) throws -> ToolRun {
            try ToolRun.run(
                "/usr/bin/curl",
                [
                    "--silent", "--show-error", "--http1.1", "--max-time", "5", "--cacert", caFile,
                    "--write-out", "\\n%{http_code}", "-v", "https://localhost:\(port)/public/tls",
                ], in: world.directory)
        }

        static func policy(_ world: E2EWorld, ports: GatewayPorts) -> String {
            world.policy(ports: ports, routes: TestRoutes.standard).replacingOccurrences(
                of: "listen: 127.0.0.1:\(ports.proxy)\n",
                with: """
                    listen:
                      - address: 127.0.0.1:\(ports.proxy)
                        tls: { certificate: live.pem, private_key: live.key, handshake_timeout: 5s }

                    """)
        }

        @Test(.timeLimit(.minutes(1)))
        func servesHTTPSAndReloadsItsCertificate() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let directory = world.directory.path
            try Self.certificate("first", in: world, subject: "first-cert")
            try Self.certificate("second", in: world, subject: "second-cert")
            for ext in ["pem", "key"] {
                try FileManager.default.copyItem(
                    atPath: "\(directory)/first.\(ext)", toPath: "\(directory)/live.\(ext)")
            }
            let gateway = try GatewayInstance.start("tls", in: world.directory) { Self.policy(world, ports: $0) }
            defer { gateway.kill() }

            let first = try Self.curl(port: gateway.ports.proxy, caFile: "\(directory)/first.pem", in: world)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stdout.hasSuffix("\n200"), "\(first.stdout)")
            let body = first.stdout.split(separator: "\n").first.map(String.init) ?? ""
            let echo = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
            let headers = try #require(echo["headers"] as? [[String]])
            #expect(
                headers.contains { $0.first?.lowercased() == "x-forwarded-proto" && $0.last == "https" }, "\(headers)")
            #expect(gateway.logEvents("listening").contains { $0["tls"] as? String == "on" })

            // A broken key on disk: the reload is refused and the running certificate stays.
            try "not a key".write(toFile: "\(directory)/live.key", atomically: true, encoding: .utf8)
            try gateway.reload(with: Self.policy(world, ports: gateway.ports))
            #expect(gateway.child.waitForStderr(timeout: .seconds(10)) { $0.contains("policy_reload_failed") })
            let kept = try Self.curl(port: gateway.ports.proxy, caFile: "\(directory)/first.pem", in: world)
            #expect(kept.stdout.hasSuffix("\n200"), "\(kept.stderr)")

            // The renewed certificate in place: SIGHUP serves it to new connections.
            for ext in ["pem", "key"] {
                try? FileManager.default.removeItem(atPath: "\(directory)/live.\(ext)")
                try FileManager.default.copyItem(
                    atPath: "\(directory)/second.\(ext)", toPath: "\(directory)/live.\(ext)")
            }
            let reloadsBefore = gateway.logEvents("policy_reloaded").count
            try gateway.reload(with: Self.policy(world, ports: gateway.ports))
            #expect(
                gateway.child.waitForStderr(timeout: .seconds(10)) { _ in
                    gateway.logEvents("policy_reloaded").count > reloadsBefore
                })
            let renewed = try Self.curl(port: gateway.ports.proxy, caFile: "\(directory)/second.pem", in: world)
            #expect(renewed.stdout.hasSuffix("\n200"), "\(renewed.stderr)")
            #expect(renewed.stderr.contains("second-cert"), "\(renewed.stderr)")
            let stale = try Self.curl(port: gateway.ports.proxy, caFile: "\(directory)/first.pem", in: world)
            #expect(stale.status != 0, "the old certificate is no longer served")
        }
    }
}
