import Foundation
import GatewayTesting
import Testing
import Verification

@testable import GatewayIO
@testable import HTTP1
@testable import PolicyModel

/// The example of DESIGN.md, verbatim: it must load unchanged.
let designExamplePolicy = """
    listen: 0.0.0.0:8080
    admin_listen: 127.0.0.1:9090
    redis: redis://127.0.0.1:6379/0        # or `store: memory` for a single dev node
    app_ids: [ "ABCDE12345.com.example.app" ]
    environment: production                # production | development | any
    challenge_ttl_seconds: 300
    trust_roots: []                        # extra roots: development only
    upstreams:
      api: { url: "http://127.0.0.1:9000", max_connections: 64 }
    endpoints:
      challenge: /app-attest/challenge
      attest: /app-attest/attest
    routes:
      - match: { path_prefix: /v1/premium, methods: [GET, POST] }
        upstream: api
        mode: enforce
        challenge: required
        binding: request
        max_body_bytes: 1048576
        on_store_error: deny
      - match: { path_prefix: / }
        upstream: api
        mode: off

    """

/// Parses `text` as `policies.yaml` and returns the error it must raise.
func policyError(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> PolicyError? {
    do {
        _ = try PolicyLoader.parse(text, sourcePath: "policies.yaml")
        Issue.record("expected the policy to be refused", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

/// The code of the error `body` throws, or nil when it does not throw.
func policyErrorCode(_ body: () throws -> GatewayPolicy) -> PolicyError.Code? {
    do {
        _ = try body()
        return nil
    } catch {
        return (error as? PolicyError)?.code
    }
}

/// A small valid policy; `extra` lines are appended at the top level.
func minimalPolicy(_ extra: String = "", routes: String? = nil) -> String {
    """
    store: memory
    app_ids: ["ABCDE12345.com.example.app"]
    upstreams:
      api: { url: "http://127.0.0.1:9000" }
    routes:
    \(routes ?? "  - match: { path_prefix: / }\n    upstream: api")
    \(extra)
    """
}

@Suite struct PolicyLoaderTests {
    @Test func designExampleLoadsToTheExpectedValues() throws {
        var warnings: [PolicyWarning] = []
        let policy = try PolicyLoader.parse(designExamplePolicy, sourcePath: "policies.yaml", warnings: &warnings)
        #expect(policy.listen == [ListenAddress(host: "0.0.0.0", port: 8080)])
        #expect(policy.adminListen == ListenAddress(host: "127.0.0.1", port: 9090))
        #expect(policy.store == .redis(url: "redis://127.0.0.1:6379/0"))
        #expect(policy.appIDs == ["ABCDE12345.com.example.app"])
        #expect(policy.environment == .production)
        #expect(policy.challengeTTLSeconds == 300)
        #expect(policy.trustRoots.isEmpty)
        #expect(policy.limits == GatewayLimits())
        #expect(policy.upstreams.count == 1)
        let api = try #require(policy.upstreams["api"])
        #expect(api == UpstreamConfiguration(name: "api", host: "127.0.0.1", port: 9000, maxConnections: 64))
        #expect(policy.endpoints == EndpointPaths(challenge: "/app-attest/challenge", attest: "/app-attest/attest"))
        #expect(policy.sourcePath == "policies.yaml")
        #expect(policy.routes.count == 2)
        #expect(
            policy.routes[0]
                == RoutePolicy(
                    name: "route0",
                    match: .init(pathPrefix: "/v1/premium", methods: ["GET", "POST"]),
                    upstream: "api",
                    mode: .enforce,
                    challenge: .required,
                    binding: .request,
                    challengeField: "challenge",
                    maxBodyBytes: 1_048_576,
                    onStoreError: .deny
                )
        )
        #expect(
            policy.routes[1]
                == RoutePolicy(name: "route1", match: .init(pathPrefix: "/"), upstream: "api", mode: .off)
        )
        #expect(warnings.isEmpty)
    }

    @Test func defaultsApplyWhenKeysAreLeftOut() throws {
        let policy = try PolicyLoader.parse(minimalPolicy(), sourcePath: "p.yaml")
        #expect(policy.listen == [PolicyDecoder.defaultListen])
        #expect(policy.adminListen == nil)
        #expect(policy.store == .memory)
        #expect(policy.environment == .production)
        #expect(policy.challengeTTLSeconds == 300)
        #expect(policy.endpoints == EndpointPaths())
        let route = try #require(policy.routes.first)
        // A route without mode enforces: the gateway fails closed.
        #expect(route.mode == .enforce)
        #expect(route.challenge == .none)
        #expect(route.binding == .request)
        #expect(route.challengeField == "challenge")
        #expect(route.maxBodyBytes == 1 << 20)
        #expect(route.onStoreError == .deny)
        #expect(route.match.methods == nil)
    }

    @Test func everyKeyIsRead() throws {
        let text = """
            listen: ["127.0.0.1:8080", "[::1]:8081", "localhost:8082"]
            admin_listen: "[::1]:9090"
            redis: "redis://:secret@10.0.0.2:6380/3"
            app_ids: [ABCDE12345.com.example.app, ZZZZZ99999.org.example.watch-kit]
            environment: any
            challenge_ttl_seconds: 60
            limits:
              header_read_timeout: 500ms
              body_read_idle_timeout: 2m
              upstream_connect_timeout: 3
              upstream_response_timeout: 1h
              keep_alive_idle_timeout: 15s
              max_connections: 1000
              max_header_bytes: 32KiB
              max_header_count: 50
              shutdown_drain_timeout: 5s
            upstreams:
              api: { url: "http://api.internal:8000/", max_connections: 8, response_timeout: 90s }
              v6: { url: "http://[::1]" }
            endpoints: { challenge: /c, attest: /a }
            routes:
              - name: upload
                match: { path: /upload, methods: [PUT] }
                upstream: api
                mode: monitor
                challenge: required
                binding: body
                challenge_field: nonce
                max_body_bytes: 64KiB
                on_store_error: allow
              - name: rest
                match: { path_prefix: /v1/ }
                upstream: v6
                mode: off
            """
        let policy = try PolicyLoader.parse(text, sourcePath: "p.yaml")
        #expect(
            policy.listen == [
                ListenAddress(host: "127.0.0.1", port: 8080), ListenAddress(host: "::1", port: 8081),
                ListenAddress(host: "localhost", port: 8082),
            ]
        )
        #expect(policy.adminListen?.description == "[::1]:9090")
        #expect(policy.store == .redis(url: "redis://:secret@10.0.0.2:6380/3"))
        #expect(policy.appIDs.count == 2)
        #expect(policy.environment == .any)
        #expect(policy.challengeTTLSeconds == 60)
        var limits = GatewayLimits()
        limits.headerReadTimeout = .milliseconds(500)
        limits.bodyReadIdleTimeout = .seconds(120)
        limits.upstreamConnectTimeout = .seconds(3)
        limits.upstreamResponseTimeout = .seconds(3600)
        limits.keepAliveIdleTimeout = .seconds(15)
        limits.maxConnections = 1000
        limits.maxHeaderBytes = 32 * 1024
        limits.maxHeaderCount = 50
        limits.shutdownDrainTimeout = .seconds(5)
        #expect(policy.limits == limits)
        // Upstream timeouts default to the limits, per-upstream keys override them.
        #expect(
            policy.upstreams["api"]
                == UpstreamConfiguration(
                    name: "api",
                    host: "api.internal",
                    port: 8000,
                    maxConnections: 8,
                    connectTimeout: .seconds(3),
                    responseTimeout: .seconds(90)
                )
        )
        #expect(policy.upstreams["v6"]?.host == "::1")
        #expect(policy.upstreams["v6"]?.port == 80)
        #expect(policy.endpoints == EndpointPaths(challenge: "/c", attest: "/a"))
        #expect(
            policy.routes[0]
                == RoutePolicy(
                    name: "upload",
                    match: .init(path: "/upload", methods: ["PUT"]),
                    upstream: "api",
                    mode: .monitor,
                    challenge: .required,
                    binding: .body,
                    challengeField: "nonce",
                    maxBodyBytes: 65_536,
                    onStoreError: .allow
                )
        )
        #expect(policy.routes[1].name == "rest")
        #expect(policy.routes[1].mode == .off)
    }

    @Test func demoPolicyFileLoadsOnceTheSimulatorCAExists() throws {
        // The committed policies.yaml, with its relative trust root, in a scratch directory.
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(contentsOf: repo.appendingPathComponent("policies.yaml"), encoding: .utf8)
        let directory = try TemporaryDirectory()
        let policyPath = directory.path + "/policies.yaml"
        try text.write(toFile: policyPath, atomically: true, encoding: .utf8)

        // Before `sim init`: a clear error naming the resolved file.
        let missing = #expect(throws: PolicyError.self) { try PolicyLoader.load(path: policyPath) }
        #expect(missing?.code == .trustRootUnreadable)
        #expect(missing?.field == "trust_roots[0]")
        #expect(missing?.message.contains(directory.path + "/run/sim/root_ca.pem") == true)
        #expect(missing?.message.contains("sim init") == true)

        try FileManager.default.createDirectory(atPath: directory.path + "/run/sim", withIntermediateDirectories: true)
        try testCertificatePEM.write(toFile: directory.path + "/run/sim/root_ca.pem", atomically: true, encoding: .utf8)
        var warnings: [PolicyWarning] = []
        let policy = try PolicyLoader.load(path: policyPath, warnings: &warnings)
        #expect(policy.trustRoots == [directory.path + "/run/sim/root_ca.pem"])
        #expect(policy.listen == [ListenAddress(host: "127.0.0.1", port: 8080)])
        #expect(policy.store == .redis(url: "redis://127.0.0.1:6390/0"))
        #expect(policy.environment == .development)
        #expect(policy.routes.map(\.name) == ["premium", "api", "public"])
        #expect(policy.routes.map(\.mode) == [.enforce, .enforce, .off])
        #expect(policy.routes[0].challenge == .required)
        #expect(policy.routes[1].binding == .request)
        #expect(warnings.map(\.code) == ["development_trust_roots"])

        let table = RouteTable(routes: policy.routes)
        #expect(table.match(method: "GET", path: "/v1/premium/x")?.name == "premium")
        #expect(table.match(method: "POST", path: "/v1/items")?.name == "api")
        #expect(table.match(method: "GET", path: "/public/logo.png")?.name == "public")
        #expect(table.match(method: "GET", path: "/other") == nil)
    }

    @Test func loadLoggingWarningsReturnsTheSamePolicy() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/policies.yaml"
        // Two warnings (memory store, unreachable route) go to the log; the policy is the same.
        try (minimalPolicy() + "\n  - { match: { path: /x }, upstream: api }\n").write(
            toFile: path, atomically: true, encoding: .utf8
        )
        var warnings: [PolicyWarning] = []
        let plain = try PolicyLoader.load(path: path, warnings: &warnings)
        #expect(warnings.map(\.code) == ["memory_store", "unreachable_route"])
        let logged = try PolicyLoader.loadLoggingWarnings(path: path)
        #expect(logged.routes == plain.routes)
        #expect(logged.store == plain.store)
        #expect(
            policyErrorCode { try PolicyLoader.loadLoggingWarnings(path: directory.path + "/none.yaml") }
                == .fileUnreadable)
    }

    @Test func loadReportsUnreadableAndOversizedFiles() throws {
        let missing = #expect(throws: PolicyError.self) { try PolicyLoader.load(path: "/nonexistent/policies.yaml") }
        #expect(missing?.code == .fileUnreadable)
        #expect(missing?.description.hasPrefix("/nonexistent/policies.yaml: cannot open: No such file") == true)

        let directory = try TemporaryDirectory()
        let big = directory.path + "/big.yaml"
        try Data(repeating: UInt8(ascii: "#"), count: PolicyLoader.maximumFileBytes + 1).write(
            to: URL(fileURLWithPath: big)
        )
        let tooLarge = #expect(throws: PolicyError.self) { try PolicyLoader.load(path: big) }
        #expect(tooLarge?.code == .fileTooLarge)

        let binary = directory.path + "/binary.yaml"
        try Data([0x6c, 0x3a, 0x20, 0xff, 0xfe]).write(to: URL(fileURLWithPath: binary))
        #expect(policyErrorCode { try PolicyLoader.load(path: binary) } == .notUTF8)

        #expect(policyErrorCode { try PolicyLoader.load(path: directory.path) } == .fileUnreadable)
    }

    @Test func summaryPrintsEffectiveSettingsAndMasksThePassword() throws {
        var warnings: [PolicyWarning] = []
        let text =
            designExamplePolicy.replacingOccurrences(of: "redis://127.0.0.1", with: "redis://:hunter2@127.0.0.1")
            + "  - match: { path: /never }\n    upstream: api\n    mode: off\n"
        let policy = try PolicyLoader.parse(text, sourcePath: "policies.yaml", warnings: &warnings)
        let summary = PolicySummary.render(policy, warnings: warnings)
        #expect(!summary.contains("hunter2"))
        #expect(summary.contains("redis redis://:***@127.0.0.1:6379/0"))
        #expect(
            summary.contains(
                "[0] route0 path_prefix=/v1/premium methods=GET,POST,HEAD upstream=api mode=enforce challenge=required binding=request challenge_field=challenge max_body_bytes=1MiB on_store_error=deny"
            )
        )
        #expect(summary.contains("[1] route1 path_prefix=/ methods=* upstream=api mode=off challenge=none"))
        #expect(summary.contains("api http://127.0.0.1:9000 max_connections=64 connect_timeout=5s response_timeout=1m"))
        #expect(summary.contains("warning: policies.yaml:24:5: routes[2]: route \"route2\" can never match"))
    }
}

/// A real PEM certificate for trust_roots tests: the pinned Apple App Attest root.
let testCertificatePEM = AppleAppAttestRoot.pem
