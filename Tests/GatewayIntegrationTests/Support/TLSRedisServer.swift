import Foundation
import GatewayTesting

@testable import GatewayIO
@testable import PolicyModel
@testable import RedisClient

/// A `redis-server` with a TLS port beside its plain one (the test PKI's `ecdsa` leaf, valid
/// for localhost and 127.0.0.1, under the test CA), and the ACL user `gateway` whose password
/// the gateway reads from a file, as in production. The plain port (`server`) stays for the
/// test's own commands.
///
/// ```swift
/// let redis = try TLSRedisServer.start()
/// defer { redis.shutDown() }
/// let store = RedisStore(url: try redis.url(), tls: try TLSRedisServer.tls())
/// ```
final class TLSRedisServer: Sendable {
    let server: RedisServer
    let tlsPort: UInt16
    /// The `gateway` user's password, one line (with its newline) in a file.
    let passwordFile: String

    static let user = "gateway"
    static let password = "tls-acl-s3cret"

    /// - Parameter requiresClientCertificate: `tls-auth-clients yes` (the test CA's clients).
    static func start(requiresClientCertificate: Bool = false) throws -> TLSRedisServer {
        let pki = TLSTestPKI.shared
        var lastError: (any Error)?
        for _ in 0..<3 {
            let tlsPort = try freeServerPort()
            do {
                let server = try RedisServer.start(extraArguments: [
                    "--tls-port", String(tlsPort),
                    "--tls-cert-file", pki.ecdsa.certificateChainPath,
                    "--tls-key-file", pki.ecdsa.privateKeyPath,
                    "--tls-ca-cert-file", pki.caCertificate,
                    "--tls-auth-clients", requiresClientCertificate ? "yes" : "no",
                    "--user", Self.user, "on", ">\(Self.password)", "~*", "&*", "+@all",
                ])
                let passwordFile = server.directory.appendingPathComponent("redis-password").path
                try (Self.password + "\n").write(toFile: passwordFile, atomically: true, encoding: .utf8)
                return TLSRedisServer(server: server, tlsPort: tlsPort, passwordFile: passwordFile)
            } catch {
                lastError = error
            }
        }
        throw lastError ?? RedisServerError("could not start a TLS redis-server")
    }

    private init(server: RedisServer, tlsPort: UInt16, passwordFile: String) {
        self.server = server
        self.tlsPort = tlsPort
        self.passwordFile = passwordFile
    }

    /// `rediss://gateway@127.0.0.1:<tls port>/<db>` with the password read from the file.
    func url(database: Int = 0, host: String = "127.0.0.1") throws -> RedisURL {
        let password = try RedisSecret.read(.file(self.passwordFile)).get()
        return try RedisURL(parsing: "rediss://\(Self.user)@\(host):\(self.tlsPort)/\(database)").withPassword(password)
    }

    /// TLS towards the server: the test CA unless told otherwise.
    static func tls(
        caFile: String = TLSTestPKI.shared.caCertificate, client: TLSCertificateFiles? = nil, serverName: String? = nil
    ) throws -> RedisTLS {
        RedisTLS(
            context: try TLSClientContext(settings: TLSClientSettings(caFilePath: caFile, clientCertificate: client)),
            serverName: serverName)
    }

    func shutDown() {
        self.server.shutDown()
    }
}
