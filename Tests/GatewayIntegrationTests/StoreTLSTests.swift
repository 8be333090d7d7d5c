import Foundation
import GatewayTesting
import Testing

@testable import GatewayIO
@testable import GatewayServe
@testable import KeyStore
@testable import PolicyModel
@testable import RedisClient

/// `rediss://` against a real `redis-server --tls-port` with the test PKI, logged in as an ACL
/// user whose password comes from a file: what works, and how a wrong CA, name or password is
/// reported (at start: `firstConfigurationFailure`, which fails `serve`; later: `/readyz`'s
/// ping). The conformance suite runs over TLS too (`StoreKind.redisTLS`, `.redisTLSOnLoop`).
@Suite(.timeLimit(.minutes(1))) struct StoreTLSTests {
    static let quiet = RedisConfiguration(logsConnectionEvents: false)

    @Test(arguments: [StoreKind.redisTLS, .redisTLSOnLoop])
    func aclUserOverTLSWithPasswordFromAFile(kind: StoreKind) async throws {
        let redis = try TLSRedisServer.start()
        defer { redis.shutDown() }
        let url = try redis.url()
        #expect(url.description.hasPrefix("rediss://gateway:***@127.0.0.1:"))
        #expect(!url.description.contains(TLSRedisServer.password))
        let subject = try RedisUnderTest(kind, url: url, configuration: Self.quiet, tls: try TLSRedisServer.tls())
        defer { subject.redis.close() }
        #expect(subject.redis.firstConfigurationFailure(timeout: .seconds(3)) == nil)
        try await waitUntilReady(subject.redis)
        let challenge = randomToken("tls-")
        #expect(await subject.store.putChallenge(challenge, ttlSeconds: 60).value == true)
        #expect(await subject.store.consumeChallenge(challenge).value == true)
        #expect(await subject.store.consumeChallenge(challenge).value == false)
        let clients = try redis.server.command("CLIENT", "LIST").text ?? ""
        #expect(clients.contains("user=gateway"), "logged in as the ACL user")
    }

    @Test func manyPipelinedCommandsOverTLS() async throws {
        let redis = try TLSRedisServer.start()
        defer { redis.shutDown() }
        let subject = try RedisUnderTest(
            .redisTLSOnLoop, url: try redis.url(), configuration: Self.quiet, tls: try TLSRedisServer.tls())
        defer { subject.redis.close() }
        try await waitUntilReady(subject.redis)
        // Large enough that writes and reads span several TLS records and socket reads.
        let results: [Result<Bool, StoreError>] = await concurrently(400) { index, done in
            subject.store.putChallenge(randomToken("p\(index)-") + String(repeating: "x", count: 300), ttlSeconds: 60) {
                done($0)
            }
        }
        #expect(results.allSatisfy { $0.value == true })
    }

    @Test func wrongCAIsAClearErrorAtStartAndInReadiness() async throws {
        let redis = try TLSRedisServer.start()
        defer { redis.shutDown() }
        let tls = try TLSRedisServer.tls(caFile: TLSTestPKI.shared.path("other-ca.pem"))
        let store = RedisStore(url: try redis.url(), configuration: Self.quiet, tls: tls)
        defer { store.close() }
        let refused = try #require(store.firstConfigurationFailure(timeout: .seconds(3)))
        #expect(refused.isConfiguration)
        #expect(refused.reason.contains("TLS handshake failed"), "\(refused.reason)")
        #expect(refused.reason.contains("certificate"), "\(refused.reason)")
        #expect(!store.isReady)
        let error = try #require(await store.ping().error)
        #expect(error.kind == .unavailable)
        #expect(error.reason.contains("TLS handshake failed"), "readiness says why: \(error.reason)")
        #expect(!error.reason.contains(TLSRedisServer.password))
    }

    @Test func certificateMustNameTheServer() async throws {
        let redis = try TLSRedisServer.start()
        defer { redis.shutDown() }
        let store = RedisStore(
            url: try redis.url(), configuration: Self.quiet, tls: try TLSRedisServer.tls(serverName: "other.test"))
        defer { store.close() }
        let refused = try #require(store.firstConfigurationFailure(timeout: .seconds(3)))
        #expect(refused.reason.contains("TLS handshake failed"), "\(refused.reason)")
        // The default server name is the URL's host: localhost is in the certificate too.
        let byName = RedisStore(
            url: try redis.url(host: "localhost"), configuration: Self.quiet, tls: try TLSRedisServer.tls())
        defer { byName.close() }
        try await waitUntilReady(byName)
    }

    @Test func wrongPasswordIsAClearErrorAtStartThatNeverShowsThePassword() async throws {
        let redis = try TLSRedisServer.start()
        defer { redis.shutDown() }
        let url = try redis.url().withPassword("not-the-password")
        let store = RedisStore(url: url, configuration: Self.quiet, tls: try TLSRedisServer.tls())
        defer { store.close() }
        let refused = try #require(store.firstConfigurationFailure(timeout: .seconds(3)))
        #expect(refused.isConfiguration)
        #expect(refused.reason.contains("AUTH refused: WRONGPASS"), "\(refused.reason)")
        #expect(!refused.reason.contains("not-the-password"))
        let error = try #require(await store.ping().error)
        #expect(error.reason.contains("AUTH refused"), "\(error.reason)")
        #expect(!error.reason.contains("not-the-password"))
    }

    @Test func plainServerBehindARedissURLIsAClearError() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let url = try RedisURL(parsing: "rediss://127.0.0.1:\(server.port)/0")
        let store = RedisStore(url: url, configuration: Self.quiet, tls: try TLSRedisServer.tls())
        defer { store.close() }
        // The plain server waits for the end of an inline command that never comes: the
        // handshake times out, and the reason says where.
        _ = store.firstConfigurationFailure(timeout: .seconds(3))
        let error = try #require(await store.ping().error)
        #expect(error.reason.contains("in the TLS handshake"), "\(error.reason)")
    }

    @Test func redissWithoutSettingsUsesTheSystemTrustStoreNeverPlainTCP() throws {
        let redis = try TLSRedisServer.start()
        defer { redis.shutDown() }
        // The CLI's `--redis rediss://…`: no redis_tls, so the system store, which does not
        // know the test CA.
        let store = RedisStore(url: try redis.url(), configuration: Self.quiet)
        defer { store.close() }
        let refused = try #require(store.firstConfigurationFailure(timeout: .seconds(3)))
        #expect(refused.reason.contains("TLS handshake failed"), "\(refused.reason)")
    }

    @Test func outageIsNotAConfigurationFailure() throws {
        let refusing = try RefusingPort()
        let url = try RedisURL(parsing: "rediss://127.0.0.1:\(refusing.port)/0")
        let store = RedisStore(url: url, configuration: Self.quiet, tls: try TLSRedisServer.tls())
        defer { store.close() }
        #expect(store.firstConfigurationFailure(timeout: .seconds(3)) == nil, "refused: keep retrying, start anyway")
        #expect(store.connection.counters.lastFailure?.isConfiguration == false)
        withExtendedLifetime(refusing) {}
    }

    @Test func clientCertificateIsPresentedWhenTheServerAsksForOne() async throws {
        let redis = try TLSRedisServer.start(requiresClientCertificate: true)
        defer { redis.shutDown() }
        let withCertificate = RedisStore(
            url: try redis.url(), configuration: Self.quiet,
            tls: try TLSRedisServer.tls(client: TLSTestPKI.shared.client))
        defer { withCertificate.close() }
        try await waitUntilReady(withCertificate)
        #expect(await withCertificate.ping().error == nil)

        let without = RedisStore(url: try redis.url(), configuration: Self.quiet, tls: try TLSRedisServer.tls())
        defer { without.close() }
        try await Task.sleep(for: .milliseconds(300))
        #expect(!without.isReady)
        let error = try #require(await without.ping().error)
        #expect(error.kind == .unavailable, "\(error.reason)")
    }

    @Test func everyReferenceIsReleasedAfterCloseOverTLS() async throws {
        let redis = try TLSRedisServer.start()
        defer { redis.shutDown() }
        let subject = try RedisUnderTest(
            .redisTLS, url: try redis.url(), configuration: Self.quiet, tls: try TLSRedisServer.tls())
        try await waitUntilReady(subject.redis)
        #expect(await subject.store.ping().error == nil)
        let counters = subject.redis.connection.counters
        subject.redis.close()
        let deadline = ContinuousClock.now + .seconds(3)
        while (counters.liveDrivers > 0 || counters.liveCommands > 0) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(counters.liveDrivers == 0 && counters.liveCommands == 0)
    }

    @Test func policyTakesRedisTLSWithRedissOnly() throws {
        let pki = TLSTestPKI.shared
        let text = """
            redis: rediss://gateway@127.0.0.1:6380/0
            redis_password_env: PATH
            redis_tls:
              ca_file: \(pki.caCertificate)
              client_certificate: \(pki.client.certificateChainPath)
              client_private_key: \(pki.client.privateKeyPath)
              server_name: redis.internal.example
            app_ids: ["ABCDE12345.com.example.app"]
            upstreams:
              api: { url: "http://127.0.0.1:9000" }
            routes:
              - match: { path_prefix: / }
                upstream: api
            """
        let policy = try PolicyLoader.parse(text, sourcePath: "policies.yaml")
        let tls = try #require(policy.redisOptions.tls)
        #expect(tls.caFile == pki.caCertificate)
        #expect(tls.serverName == "redis.internal.example")
        #expect(tls.clientCertificate?.certificatePath == pki.client.certificateChainPath)

        let plain = text.replacingOccurrences(of: "rediss://", with: "redis://")
        #expect(throws: PolicyError.self) { try PolicyLoader.parse(plain, sourcePath: "policies.yaml") }
        do {
            _ = try PolicyLoader.parse(plain, sourcePath: "policies.yaml")
        } catch {
            #expect(error.description.contains("redis_tls applies to rediss://"), "\(error)")
        }
    }

    @Test func factoryRefusesToStartWithAWrongCA() throws {
        let redis = try TLSRedisServer.start()
        defer { redis.shutDown() }
        var options = RedisStoreOptions(password: .file(redis.passwordFile))
        options.tls = RedisTLSConfiguration(caFile: TLSTestPKI.shared.path("other-ca.pem"))
        let policy = GatewayPolicy(
            listen: [ListenAddress(host: "127.0.0.1", port: 0)],
            store: .redis(url: "rediss://gateway@127.0.0.1:\(redis.tlsPort)/0"),
            appIDs: [EnforcementHarness.appID],
            environment: .production,
            upstreams: ["api": UpstreamConfiguration(name: "api", host: "127.0.0.1", port: 9)],
            routes: EnforcementHarness.routes,
            redisOptions: options
        )
        let factory = EnforcementGateFactory(registry: MetricsRegistry())
        do {
            _ = try factory.makeGates(for: policy)
            Issue.record("a wrong CA must fail the start")
        } catch {
            let text = "\(error)"
            #expect(text.contains("rediss://gateway:***@127.0.0.1:\(redis.tlsPort)/0"), "\(text)")
            #expect(text.contains("TLS handshake failed"), "\(text)")
            #expect(!text.contains(TLSRedisServer.password))
        }
    }
}
