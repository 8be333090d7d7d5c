import Foundation
import GatewayTesting
import Glibc

@testable import GatewayIO
@testable import PolicyModel

/// A real nginx serving HTTPS on a free 127.0.0.1 port for one test (`master_process off`:
/// one process, killed by `stop()` and by deinit). Every response is a small JSON document
/// made from nginx's own variables, so a test sees the upstream's side of the connection:
/// `connection` (nginx's connection serial number), `requests` (requests on it so far),
/// `reused` ("r" when the TLS session was resumed, else "."), `client` (the verified client
/// certificate's subject, mTLS), `uri`.
final class NginxTLSUpstream: @unchecked Sendable {
    let port: UInt16
    let directory: String
    private let process: Process

    /// - Parameters:
    ///   - certificate: the server's chain and key.
    ///   - clientCA: with it, `ssl_verify_client on` against this CA file.
    ///   - keepAliveTimeout: nginx closes idle keep-alive connections after it (close_notify + FIN).
    init(certificate: TLSCertificateFiles, clientCA: String? = nil, keepAliveTimeout: String = "60s") throws {
        var template = Array("/tmp/attest-gateway-nginx-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TestFailure("mkdtemp failed") }
        self.directory = String(cString: made)
        var lastError = "nginx did not start"
        for _ in 0..<5 {
            let port = try freeServerPort()
            try Self.configuration(
                port: port, certificate: certificate, clientCA: clientCA, keepAliveTimeout: keepAliveTimeout,
                directory: self.directory
            ).write(toFile: "\(self.directory)/nginx.conf", atomically: true, encoding: .utf8)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
            process.arguments = ["-p", self.directory, "-e", "\(self.directory)/error.log", "-c", "nginx.conf"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            if Self.waitForListening(port: port, process: process) {
                self.port = port
                self.process = process
                return
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            lastError = (try? String(contentsOfFile: "\(self.directory)/error.log", encoding: .utf8)) ?? lastError
        }
        throw TestFailure("nginx: \(lastError)")
    }

    func stop() {
        guard self.process.isRunning else { return }
        kill(self.process.processIdentifier, SIGKILL)
        self.process.waitUntilExit()
    }

    deinit {
        self.stop()
        try? FileManager.default.removeItem(atPath: self.directory)
    }

    /// `https://127.0.0.1:<port>` verified as `localhost` against the test CA (`caFile`).
    func upstream(
        name: String = "api", serverName: String = "localhost", caFile: String?,
        clientCertificate: TLSCertificateFiles? = nil, maxConnections: Int = 8, connectTimeout: Duration = .seconds(5)
    ) -> UpstreamConfiguration {
        var configuration = UpstreamConfiguration(
            name: name, host: "127.0.0.1", port: self.port, maxConnections: maxConnections,
            connectTimeout: connectTimeout)
        configuration.tls = UpstreamTLSConfiguration(
            serverName: serverName, caFile: caFile,
            clientCertificate: clientCertificate.map {
                PEMCertificateKeyPair(certificatePath: $0.certificateChainPath, privateKeyPath: $0.privateKeyPath)
            })
        return configuration
    }

    private static func configuration(
        port: UInt16, certificate: TLSCertificateFiles, clientCA: String?, keepAliveTimeout: String, directory: String
    ) -> String {
        let verify = clientCA.map { "ssl_verify_client on;\n        ssl_client_certificate \($0);" } ?? ""
        return """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(directory)/nginx.pid;
            error_log \(directory)/error.log info;
            events { worker_connections 256; }
            http {
                access_log off;
                client_body_temp_path \(directory)/body;
                proxy_temp_path \(directory)/proxy;
                fastcgi_temp_path \(directory)/fastcgi;
                uwsgi_temp_path \(directory)/uwsgi;
                scgi_temp_path \(directory)/scgi;
                keepalive_timeout \(keepAliveTimeout);
                server {
                    listen 127.0.0.1:\(port) ssl;
                    ssl_certificate \(certificate.certificateChainPath);
                    ssl_certificate_key \(certificate.privateKeyPath);
                    ssl_protocols TLSv1.2 TLSv1.3;
                    ssl_session_cache shared:upstream:1m;
                    \(verify)
                    location / {
                        default_type application/json;
                        return 200 '{"connection":$connection,"requests":$connection_requests,"reused":"$ssl_session_reused","client":"$ssl_client_s_dn","uri":"$uri"}';
                    }
                }
            }
            """
    }

    /// Polls until something accepts on the port (nginx binds before it serves), or the process died.
    private static func waitForListening(port: UInt16, process: Process) -> Bool {
        for _ in 0..<250 {
            guard process.isRunning else { return false }
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            close(fd)
            if connected == 0 { return true }
            usleep(20_000)
        }
        return false
    }
}
