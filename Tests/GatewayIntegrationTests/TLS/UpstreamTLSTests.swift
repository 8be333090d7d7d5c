import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import GatewayIO
@testable import HTTP1
@testable import HTTPProxy
@testable import PolicyModel

/// `https://` upstreams through the in-process gateway against a real nginx (started per test
/// on a free loopback port) under the test PKI: keep-alive reuse, session resumption, the three
/// certificate failures with their own 502 codes, mTLS, an upstream closing a pooled
/// connection, a handshake that never finishes, and the context rebuilt by a reload.
@Suite(.serialized) struct UpstreamTLSTests {
    let pki = TLSTestPKI.shared

    static func metric(_ gateway: TestGateway, _ series: String) -> Int {
        for line in gateway.metrics.render().split(separator: "\n") where line.hasPrefix(series + " ") {
            return Int(line.split(separator: " ").last ?? "") ?? -1
        }
        return 0
    }

    static func handshakes(_ gateway: TestGateway, resumed: Bool) -> Int {
        Self.metric(gateway, "attest_gateway_upstream_tls_handshakes_total{upstream=\"api\",resumed=\"\(resumed)\"}")
    }

    static func failures(_ gateway: TestGateway, reason: String) -> Int {
        Self.metric(gateway, "attest_gateway_upstream_tls_failures_total{upstream=\"api\",reason=\"\(reason)\"}")
    }

    static func get(_ gateway: TestGateway, _ path: String) throws -> TestResponse {
        try TestHTTPClient.request(port: gateway.port, "GET \(path) HTTP/1.1\r\nHost: test\r\n\r\n")
    }

    // MARK: - Success

    @Test(.timeLimit(.minutes(1)))
    func keepAliveRequestsShareOneVerifiedTLSConnection() throws {
        let nginx = try NginxTLSUpstream(certificate: self.pki.ecdsa)
        let gateway = try TestGateway(upstreams: ["api": nginx.upstream(caFile: self.pki.caCertificate)], loops: 1)
        defer { gateway.stop() }
        let client = try TestHTTPClient(port: gateway.port)
        var connections = Set<Int>()
        for i in 1...5 {
            try client.send("GET /k/\(i) HTTP/1.1\r\nHost: test\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 200, "\(response.bodyText)")
            let echo = try response.json()
            #expect(echo["uri"] as? String == "/k/\(i)")
            #expect(echo["requests"] as? Int == i, "request \(i) is the \(i)th on the upstream connection")
            connections.insert(try #require(echo["connection"] as? Int))
        }
        #expect(connections.count == 1)
        #expect(Self.handshakes(gateway, resumed: false) == 1)
        #expect(Self.handshakes(gateway, resumed: true) == 0)
        let target = try #require(gateway.server.upstreamTable.targets["api"])
        // The TLS 1.3 ticket nginx sent after the handshake is kept for the next connection.
        #expect(target.tls?.context.cachedSessionCount == 1)
    }

    /// nginx closes the idle pooled connection (keepalive_timeout 1s, close_notify + FIN): the
    /// pool drops it, and the next request opens a new connection that resumes the session.
    @Test(.timeLimit(.minutes(1)))
    func aConnectionClosedByTheUpstreamIsReplacedByAResumedOne() throws {
        let nginx = try NginxTLSUpstream(certificate: self.pki.ecdsa, keepAliveTimeout: "1s")
        let gateway = try TestGateway(upstreams: ["api": nginx.upstream(caFile: self.pki.caCertificate)], loops: 1)
        defer { gateway.stop() }
        let first = try Self.get(gateway, "/first")
        #expect(first.status == 200, "\(first.bodyText)")
        let firstEcho = try first.json()
        #expect(firstEcho["reused"] as? String == ".")
        let pool = try #require(gateway.server.upstreamTable.targets["api"]?.pools.first)
        #expect(eventually { Self.idleCount(pool) == 1 })
        // nginx closes it after 1 s; the idle connection sees the hang-up and leaves the pool.
        #expect(eventually(timeout: .seconds(4)) { Self.idleCount(pool) == 0 && Self.openCount(pool) == 0 })

        let second = try Self.get(gateway, "/second")
        #expect(second.status == 200, "\(second.bodyText)")
        let secondEcho = try second.json()
        #expect(secondEcho["connection"] as? Int != firstEcho["connection"] as? Int)
        #expect(secondEcho["reused"] as? String == "r", "nginx saw a resumed session")
        #expect(Self.handshakes(gateway, resumed: false) == 1)
        #expect(Self.handshakes(gateway, resumed: true) == 1)
        #expect(
            Self.metric(gateway, "attest_gateway_upstream_errors_total{upstream=\"api\",kind=\"unavailable\"}") == 0)
    }

    static func idleCount(_ pool: UpstreamPool) -> Int {
        Self.onLoop(pool) { pool.idleCount }
    }

    static func openCount(_ pool: UpstreamPool) -> Int {
        Self.onLoop(pool) { pool.openCount }
    }

    /// Reads loop-confined pool state on its loop.
    static func onLoop(_ pool: UpstreamPool, _ read: @escaping @Sendable () -> Int) -> Int {
        let done = DispatchSemaphore(value: 0)
        let box = Box()
        pool.loop.execute {
            box.value = read()
            done.signal()
        }
        done.wait()
        return box.value
    }

    final class Box: @unchecked Sendable {
        var value = 0
    }

    // MARK: - Certificate failures: 502, each with its own code, never retried

    enum BadCertificate: String, CaseIterable, Sendable {
        case expired, wrongHost, unknownCA

        func files(_ pki: TLSTestPKI) -> TLSCertificateFiles {
            switch self {
            case .expired: pki.expired
            case .wrongHost: pki.wrongHost
            case .unknownCA: pki.unknownCA
            }
        }

        var code: String {
            switch self {
            case .expired: "upstream_tls_certificate_expired"
            case .wrongHost: "upstream_tls_hostname_mismatch"
            case .unknownCA: "upstream_tls_unknown_ca"
            }
        }

        var reason: String {
            switch self {
            case .expired: "expired_certificate"
            case .wrongHost: "hostname_mismatch"
            case .unknownCA: "unknown_ca"
            }
        }
    }

    @Test(.timeLimit(.minutes(1)), arguments: BadCertificate.allCases)
    func aRefusedCertificateIsA502WithItsOwnCode(_ bad: BadCertificate) throws {
        let nginx = try NginxTLSUpstream(certificate: bad.files(self.pki))
        let gateway = try TestGateway(upstreams: ["api": nginx.upstream(caFile: self.pki.caCertificate)], loops: 1)
        defer { gateway.stop() }
        let response = try Self.get(gateway, "/refused")
        #expect(response.status == 502)
        let body = try response.json()
        #expect(body["error"] as? String == bad.code, "\(response.bodyText)")
        #expect(Self.failures(gateway, reason: bad.reason) == 1, "one handshake: a TLS failure is not retried")
        #expect(Self.metric(gateway, "attest_gateway_upstream_errors_total{upstream=\"api\",kind=\"tls\"}") == 1)
        #expect(Self.handshakes(gateway, resumed: false) == 0)
        // The client connection stays usable, and the next request fails the same way.
        let again = try Self.get(gateway, "/again")
        #expect(try again.json()["error"] as? String == bad.code)
        #expect(Self.failures(gateway, reason: bad.reason) == 2)
    }

    /// A plain-HTTP server behind an `https://` URL: no certificate verdict, the generic code.
    @Test(.timeLimit(.minutes(1)))
    func aServerThatDoesNotSpeakTLSIsTheGenericTLSError() throws {
        let plain = try UpstreamProcess()
        var configuration = plain.configuration
        configuration.tls = UpstreamTLSConfiguration(serverName: "localhost", caFile: self.pki.caCertificate)
        let gateway = try TestGateway(upstreams: ["api": configuration], loops: 1)
        defer { gateway.stop() }
        let response = try Self.get(gateway, "/plain")
        #expect(response.status == 502)
        #expect(try response.json()["error"] as? String == "upstream_tls_error", "\(response.bodyText)")
        #expect(Self.failures(gateway, reason: "handshake") == 1)
    }

    /// An upstream that accepts the TCP connection and never answers the ClientHello: the
    /// connect timeout covers the handshake (504), counted as a TLS failure `timeout`.
    @Test(.timeLimit(.minutes(1)))
    func aHandshakeThatNeverFinishesTimesOut() throws {
        let silent = try SilentListener()
        var configuration = UpstreamConfiguration(
            name: "api", host: "127.0.0.1", port: silent.port, maxConnections: 2, connectTimeout: .milliseconds(300))
        configuration.tls = UpstreamTLSConfiguration(serverName: "localhost", caFile: self.pki.caCertificate)
        let gateway = try TestGateway(upstreams: ["api": configuration], loops: 1)
        defer { gateway.stop() }
        let started = ContinuousClock.now
        let response = try Self.get(gateway, "/silent")
        #expect(response.status == 504)
        #expect(try response.json()["error"] as? String == "upstream_timeout")
        #expect(ContinuousClock.now - started < .seconds(3))
        // The client's own connect timer may answer first; the pool's deadline, set for the
        // same moment, counts the handshake right after.
        #expect(eventually { Self.failures(gateway, reason: "timeout") == 1 })
    }

    // MARK: - mTLS

    @Test(.timeLimit(.minutes(1)))
    func aClientCertificateIsPresentedToAnUpstreamThatRequiresOne() throws {
        let nginx = try NginxTLSUpstream(certificate: self.pki.ecdsa, clientCA: self.pki.caCertificate)
        let gateway = try TestGateway(
            upstreams: ["api": nginx.upstream(caFile: self.pki.caCertificate, clientCertificate: self.pki.client)],
            loops: 1)
        defer { gateway.stop() }
        let response = try Self.get(gateway, "/mtls")
        #expect(response.status == 200, "\(response.bodyText)")
        let client = try #require(try response.json()["client"] as? String)
        #expect(client.contains("CN=app-client"), "\(client)")
    }

    /// nginx (`ssl_verify_client on`) finishes the handshake and answers 400 itself when no
    /// certificate came: the gateway relays that answer.
    @Test(.timeLimit(.minutes(1)))
    func withoutTheClientCertificateTheUpstreamRefuses() throws {
        let nginx = try NginxTLSUpstream(certificate: self.pki.ecdsa, clientCA: self.pki.caCertificate)
        let gateway = try TestGateway(upstreams: ["api": nginx.upstream(caFile: self.pki.caCertificate)], loops: 1)
        defer { gateway.stop() }
        let response = try Self.get(gateway, "/mtls")
        #expect(response.status == 400)
        #expect(response.bodyText.contains("No required SSL certificate was sent"), "\(response.bodyText)")
    }

    // MARK: - Reload

    /// A reload rebuilds the context from the files (same configuration: the warm pools stay);
    /// a CA file that cannot be used keeps the running context.
    @Test(.timeLimit(.minutes(1)))
    func reloadRebuildsTheContextAndABadCAFileKeepsTheRunningOne() throws {
        let nginx = try NginxTLSUpstream(certificate: self.pki.ecdsa)
        let caFile = self.pki.path("reload-ca-\(UInt32.random(in: 0...UInt32.max)).pem")
        try FileManager.default.copyItem(atPath: self.pki.caCertificate, toPath: caFile)
        defer { try? FileManager.default.removeItem(atPath: caFile) }
        let configuration = nginx.upstream(caFile: caFile)
        let gateway = try TestGateway(upstreams: ["api": configuration], loops: 1)
        defer { gateway.stop() }
        #expect(try Self.get(gateway, "/before").status == 200)
        let target = try #require(gateway.server.upstreamTable.targets["api"])
        let running = try #require(target.tls?.context)

        try TLSTestPKI.write("not a certificate\n", to: caFile)
        #expect(throws: TLSConfigurationError.self) { try gateway.server.update(upstreams: ["api": configuration]) }
        #expect(gateway.server.upstreamTable.targets["api"] === target)
        #expect(target.tls?.context === running)
        #expect(try Self.get(gateway, "/kept").status == 200)

        // A CA that does not sign nginx's certificate: the reload succeeds, new connections
        // are verified against it and refused.
        try FileManager.default.removeItem(atPath: caFile)
        try FileManager.default.copyItem(atPath: self.pki.path("other-ca.pem"), toPath: caFile)
        try gateway.server.update(upstreams: ["api": configuration])
        #expect(gateway.server.upstreamTable.targets["api"] === target, "same configuration: same pools")
        #expect(target.tls?.context !== running)
        let pool = try #require(target.pools.first)
        _ = Self.onLoop(pool) {
            pool.closeIdle()
            return 0
        }
        let refused = try Self.get(gateway, "/after")
        #expect(refused.status == 502)
        #expect(try refused.json()["error"] as? String == "upstream_tls_unknown_ca")
    }

    // MARK: - Memory

    /// Idle pooled connections must not hold OpenSSL's record buffers (docs/tls.md): a context
    /// releases them after each record unless its owner sweeps them.
    @Test func clientContextsReleaseIdleBuffers() throws {
        let context = try TLSClientContext(settings: TLSClientSettings(caFilePath: self.pki.caCertificate))
        #expect(context.releasesIdleBuffers)
        let swept = try TLSClientContext(
            settings: TLSClientSettings(caFilePath: self.pki.caCertificate), releasesBuffersAfterEachRecord: false)
        #expect(!swept.releasesIdleBuffers)
    }

    /// The server's upstream pools keep a connection's record buffers between requests and
    /// free them once it spent a tick unused in the pool; the connection then serves again.
    @Test(.timeLimit(.minutes(1)))
    func pooledConnectionBuffersAreSweptOnceIdleAndTheConnectionServesAgain() throws {
        let nginx = try NginxTLSUpstream(certificate: self.pki.ecdsa)
        let gateway = try TestGateway(upstreams: ["api": nginx.upstream(caFile: self.pki.caCertificate)], loops: 1)
        defer { gateway.stop() }
        let target = try #require(gateway.server.upstreamTable.targets["api"])
        let pool = try #require(target.pools.first)
        #expect(pool.bufferSweep != nil)
        let swept = { Self.onLoop(pool) { pool.bufferSweep?.count ?? -1 } }
        #expect(target.tls?.context.releasesIdleBuffers == false)

        let first = try Self.get(gateway, "/first")
        #expect(first.status == 200, "\(first.bodyText)")
        #expect(eventually { Self.idleCount(pool) == 1 })
        #expect(swept() == 1, "listed when it went back to the pool")
        // Two ticks (100 ms each): one finds it used, the next frees its buffers and drops it.
        #expect(eventually(timeout: .seconds(2)) { swept() == 0 })
        #expect(Self.idleCount(pool) == 1, "still pooled")

        let second = try Self.get(gateway, "/second")
        #expect(second.status == 200, "\(second.bodyText)")
        #expect(try second.json()["requests"] as? Int == 2, "the same upstream connection, buffers allocated again")
        #expect(Self.handshakes(gateway, resumed: false) == 1)
    }
}

/// A loopback listener that never accepts: connects complete (the kernel queues them) and
/// nothing is ever answered.
final class SilentListener: @unchecked Sendable {
    let port: UInt16
    private let fd: Int32

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            throw TestFailure("silent listener: errno \(errno)")
        }
        self.fd = fd
        self.port = UInt16(bigEndian: address.sin_port)
    }

    deinit { close(self.fd) }
}
