import Foundation
import GatewayTesting
import Glibc
import Testing

extension EndToEnd {
    /// The built binary proxying to an `https://` upstream named in its policy (`url: https://`,
    /// `server_name`, `ca_file`): a real nginx with a certificate under a CA the test makes.
    /// Requests pass over one verified, pooled TLS connection; the metrics count the handshake;
    /// a reload whose `ca_file` is broken is refused and the running context keeps serving.
    @Suite struct UpstreamTLS {
        /// A CA and a leaf for localhost under it, in `directory`: upstream-ca.pem, upstream.pem/.key.
        static func makePKI(in world: E2EWorld) throws {
            let d = world.directory.path
            _ = try world.directory.write(
                "upstream.ext",
                "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n"
                    + "subjectAltName=DNS:localhost\n")
            for arguments in [
                ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "\(d)/upstream-ca.key"],
                [
                    "req", "-x509", "-new", "-key", "\(d)/upstream-ca.key", "-subj", "/CN=E2E upstream CA", "-days",
                    "2",
                    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
                    "-out", "\(d)/upstream-ca.pem",
                ],
                ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "\(d)/upstream.key"],
                ["req", "-new", "-key", "\(d)/upstream.key", "-subj", "/CN=localhost", "-out", "\(d)/upstream.csr"],
                [
                    "x509", "-req", "-in", "\(d)/upstream.csr", "-CA", "\(d)/upstream-ca.pem", "-CAkey",
                    "\(d)/upstream-ca.key", "-CAcreateserial", "-days", "2", "-extfile", "\(d)/upstream.ext",
                    "-out", "\(d)/upstream.pem",
                ],
            ] {
                let run = try ToolRun.run("/usr/bin/openssl", arguments, in: world.directory)
                guard run.status == 0 else { throw E2EError("openssl \(arguments[0]) failed: \(run.stderr)") }
            }
        }

        /// nginx (one process) serving HTTPS on a free port with upstream.pem; answers JSON
        /// naming its connection and the request's URI.
        static func startNginx(in world: E2EWorld, port fixedPort: UInt16? = nil) throws -> (ChildProcess, UInt16) {
            let d = world.directory.path
            for attempt in 0..<4 {
                let port = try fixedPort ?? freeServerPort()
                let configuration = """
                    daemon off;
                    master_process off;
                    pid \(d)/nginx.pid;
                    error_log \(d)/nginx-error.log info;
                    events { worker_connections 64; }
                    http {
                        access_log off;
                        client_body_temp_path \(d)/nginx-body;
                        proxy_temp_path \(d)/nginx-proxy;
                        fastcgi_temp_path \(d)/nginx-fastcgi;
                        uwsgi_temp_path \(d)/nginx-uwsgi;
                        scgi_temp_path \(d)/nginx-scgi;
                        server {
                            listen 127.0.0.1:\(port) ssl;
                            ssl_certificate \(d)/upstream.pem;
                            ssl_certificate_key \(d)/upstream.key;
                            location / {
                                default_type application/json;
                                return 200 '{"connection":$connection,"requests":$connection_requests,"uri":"$uri"}';
                            }
                        }
                    }
                    """
                let path = try world.directory.write("nginx.conf", configuration)
                let child = try ChildProcess(
                    label: "nginx-\(port)-\(attempt)-\(UInt32.random(in: 0...UInt32.max))",
                    executable: "/usr/sbin/nginx",
                    arguments: ["-p", d, "-e", "\(d)/nginx-error.log", "-c", path], directory: world.directory)
                let listening = eventually(timeout: .seconds(10)) {
                    guard child.isRunning else { return true }
                    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                    defer { close(fd) }
                    var address = loopbackAddress(port: port)
                    return withUnsafePointer(to: &address) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                        }
                    }
                }
                if listening && child.isRunning { return (child, port) }
                child.kill()
            }
            throw E2EError("nginx did not start: \(world.directory.file("nginx-error.log"))")
        }

        static func policy(_ world: E2EWorld, ports: GatewayPorts, upstreamPort: UInt16) -> String {
            world.policy(ports: ports, routes: TestRoutes.standard).replacingOccurrences(
                of: "api: { url: \"http://127.0.0.1:\(world.upstream.port)\", max_connections: 32 }",
                with: """
                    api:
                        url: "https://127.0.0.1:\(upstreamPort)"
                        server_name: localhost
                        ca_file: upstream-ca.pem
                        max_connections: 32
                    """)
        }

        @Test(.timeLimit(.minutes(1)))
        func proxiesToAnHTTPSUpstreamOverOnePooledVerifiedConnection() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            try Self.makePKI(in: world)
            var (nginx, upstreamPort) = try Self.startNginx(in: world)
            defer { nginx.kill() }
            let gateway = try GatewayInstance.start("upstream-tls", in: world.directory) {
                Self.policy(world, ports: $0, upstreamPort: upstreamPort)
            }
            defer { gateway.kill() }
            // `serve` runs one event loop per core, each with its own pool: each request is a
            // new client connection, spread over the loops, so up to one upstream connection
            // per loop, each reused, and a handshake only per upstream connection.
            var connections = Set<Int>()
            for i in 1...6 {
                let response = try gateway.request("GET", "/public/tls/\(i)")
                #expect(response.status == 200, "\(response)")
                let echo = try response.json()
                #expect(echo["uri"] as? String == "/public/tls/\(i)")
                connections.insert(try #require(echo["connection"] as? Int))
            }
            let loops = ProcessInfo.processInfo.activeProcessorCount
            #expect(connections.count <= loops, "pooled TLS connections served all six: \(connections)")
            let metrics = try gateway.metrics()
            let full = metrics["attest_gateway_upstream_tls_handshakes_total{upstream=\"api\",resumed=\"false\"}"] ?? 0
            let resumed =
                metrics["attest_gateway_upstream_tls_handshakes_total{upstream=\"api\",resumed=\"true\"}"] ?? 0
            #expect(full >= 1)
            #expect(Int(full + resumed) == connections.count, "one handshake per upstream connection")

            // A broken ca_file on disk: the reload is refused and the running context keeps serving.
            _ = try world.directory.write("upstream-ca.pem", "not a certificate\n")
            try gateway.reload(with: Self.policy(world, ports: gateway.ports, upstreamPort: upstreamPort))
            #expect(
                gateway.child.waitForStderr(timeout: .seconds(10)) {
                    $0.contains("policy_reload_failed") && $0.contains("upstream-ca.pem")
                })
            // A new upstream process (the pooled connection dies with the old one): the next
            // request needs a new handshake, verified with the context that was kept.
            nginx.kill()
            (nginx, upstreamPort) = try Self.startNginx(in: world, port: upstreamPort)
            let kept = try gateway.request("GET", "/public/tls/kept")
            #expect(kept.status == 200, "\(kept)")
            let after = try gateway.metrics()
            let handshakes = ["false", "true"].reduce(0.0) {
                $0 + (after["attest_gateway_upstream_tls_handshakes_total{upstream=\"api\",resumed=\"\($1)\"}"] ?? 0)
            }
            #expect(
                Int(handshakes) == connections.count + 1, "\(after.filter { $0.key.contains("upstream_tls") })")
        }
    }
}
