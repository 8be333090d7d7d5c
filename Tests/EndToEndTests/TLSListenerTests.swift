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

            // The binary's TLS listener offers h2 by default (`tls.http2`): curl speaks HTTP/2.
            let h2 = try ToolRun.run(
                "/usr/bin/curl",
                [
                    "--silent", "--show-error", "--http2", "--max-time", "5", "--cacert", "\(directory)/first.pem",
                    "--output", "/dev/null", "--write-out", "%{http_version} %{http_code}",
                    "https://localhost:\(gateway.ports.proxy)/public/tls",
                ], in: world.directory)
            #expect(h2.stdout == "2 200", "\(h2.stdout) \(h2.stderr)")
            #expect(gateway.logEvents("listening").contains { $0["http2"] as? String == "h2" })

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

        /// Continuous HTTPS traffic from Python's `ssl` (4 threads; each opens a connection,
        /// checks the certificate's subject, makes 3 keep-alive requests, closes, repeats) while
        /// the certificate files are swapped and SIGHUP reloads them 4 times. No request may
        /// fail, and the clients must have been served both certificates (the reloads happened
        /// under the traffic, not before or after it).
        static let loadClient = """
            import http.client, json, ssl, sys, threading, time
            port, cafile, seconds = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
            context = ssl.create_default_context(cafile=cafile)
            lock, stop = threading.Lock(), time.monotonic() + seconds
            stats = {"requests": 0, "connections": 0, "failures": [], "subjects": {}}
            def worker(number):
                while time.monotonic() < stop:
                    try:
                        connection = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
                        connection.connect()
                        subject = dict(part[0] for part in connection.sock.getpeercert()["subject"])["commonName"]
                        for index in range(3):
                            connection.request("GET", f"/public/load/{number}/{index}")
                            response = connection.getresponse()
                            body = response.read()
                            if response.status != 200 or f"/public/load/{number}/{index}".encode() not in body:
                                raise RuntimeError(f"status {response.status}: {body[:200]!r}")
                            with lock:
                                stats["requests"] += 1
                        connection.close()
                        with lock:
                            stats["connections"] += 1
                            stats["subjects"][subject] = stats["subjects"].get(subject, 0) + 1
                    except Exception as error:
                        with lock:
                            stats["failures"].append(f"{type(error).__name__}: {error}")
            threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            print(json.dumps(stats))
            """

        @Test(.timeLimit(.minutes(2)))
        func certificateReloadsUnderLoadFailNoRequest() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let directory = world.directory.path
            try Self.certificate("first", in: world, subject: "first-cert")
            try Self.certificate("second", in: world, subject: "second-cert")
            for ext in ["pem", "key"] {
                try FileManager.default.copyItem(
                    atPath: "\(directory)/first.\(ext)", toPath: "\(directory)/live.\(ext)")
            }
            // Both self-signed certificates are trusted, so either one verifies.
            let bundle =
                try String(contentsOfFile: "\(directory)/first.pem", encoding: .utf8)
                + (try String(contentsOfFile: "\(directory)/second.pem", encoding: .utf8))
            let caFile = try world.directory.write("both.pem", bundle)
            let script = try world.directory.write("load.py", Self.loadClient)
            let gateway = try GatewayInstance.start("tls-load", in: world.directory) { Self.policy(world, ports: $0) }
            defer { gateway.kill() }

            let seconds = 8.0
            let load = try ChildProcess(
                label: "tls-load-client", executable: "/usr/bin/python3",
                arguments: [script, String(gateway.ports.proxy), caFile, String(seconds)], directory: world.directory)
            defer { load.kill() }
            let started = ContinuousClock.now
            var reloads = 0
            for (round, name) in ["second", "first", "second", "first"].enumerated() {
                sleep(until: started + .milliseconds(1200 * (round + 1)))
                for ext in ["pem", "key"] {
                    let temporary = "\(directory)/live.\(ext).new"
                    try? FileManager.default.removeItem(atPath: temporary)
                    try FileManager.default.copyItem(atPath: "\(directory)/\(name).\(ext)", toPath: temporary)
                    guard rename(temporary, "\(directory)/live.\(ext)") == 0 else { throw E2EError("rename") }
                }
                let before = gateway.logEvents("policy_reloaded").count
                try gateway.reload(with: Self.policy(world, ports: gateway.ports))
                let reloaded = gateway.child.waitForStderr(timeout: .seconds(10)) { _ in
                    gateway.logEvents("policy_reloaded").count > before
                }
                #expect(reloaded, "reload \(round + 1): \(gateway.child.stderr.suffix(800))")
                if reloaded { reloads += 1 }
            }
            #expect(ContinuousClock.now - started < .seconds(seconds), "the reloads must happen during the traffic")
            let status = load.waitForExit(timeout: .seconds(60))
            #expect(status == 0, "\(load.stderr.suffix(1500))")
            let line = load.stdout.split(separator: "\n").last.map(String.init) ?? ""
            let stats = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let failures = stats["failures"] as? [String] ?? ["no stats: \(line)"]
            let requests = stats["requests"] as? Int ?? 0
            let subjects = stats["subjects"] as? [String: Int] ?? [:]
            print(
                "TLS reload under load: \(requests) requests, \(stats["connections"] ?? 0) connections, \(reloads) reloads, subjects \(subjects), \(failures.count) failed"
            )
            #expect(reloads == 4)
            #expect(failures.isEmpty, "\(failures.count) failed: \(failures.prefix(5))")
            #expect(requests >= 100, "too little traffic to prove anything: \(stats)")
            #expect((subjects["first-cert"] ?? 0) > 0 && (subjects["second-cert"] ?? 0) > 0, "\(subjects)")
            #expect(gateway.child.isRunning)
        }
    }
}
