import Foundation
import GatewayTesting
import Glibc
import Simulator
import Testing
import Verification

@testable import GatewayIO
@testable import GatewayServe
@testable import HTTP1
@testable import HTTPProxy
@testable import PolicyModel

/// The gate as `serve` wires it, reached over HTTP/2 (h2c, curl): an assertion signed as for
/// HTTP/1.1 passes on an enforce route, a replayed or missing one is refused with HTTP/1.1's
/// code, and a gRPC request gets the refusal as `grpc-status` 16.
@Suite(.serialized, .timeLimit(.minutes(1))) struct HTTP2EnforcementTests {
    static func curl(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try TLSTestPKI.run(
            "/usr/bin/curl", ["--silent", "--show-error", "--max-time", "10", "--http2-prior-knowledge"] + arguments)
    }

    @Test func anAssertionSignedAsForHTTP11PassesOverHTTP2AndAReplayIsRefusedWithTheSameCode() throws {
        let upstream = try EnforcementServeTests.Upstream()
        defer { upstream.stop() }
        let directory = try TemporaryDirectory()
        let rootPath = directory.path + "/root_ca.pem"
        try EnforcementHarness.authority.rootCertificatePEM.write(toFile: rootPath, atomically: true, encoding: .utf8)
        var policy = GatewayPolicy(
            listen: [ListenAddress(host: "127.0.0.1", port: 0)], store: .memory, appIDs: [EnforcementHarness.appID],
            environment: .production, trustRoots: [rootPath],
            upstreams: ["api": UpstreamConfiguration(name: "api", host: "127.0.0.1", port: upstream.port)],
            routes: EnforcementHarness.routes)
        policy.listeners[0].h2c = true
        let served = policy
        let registry = MetricsRegistry()
        let server = try GatewayServer(loopCount: 1, metrics: registry, accessLog: nil)
        let factory = EnforcementGateFactory(registry: registry)
        let service = GatewayService(
            configPath: "<test>", server: server, load: { _ in served },
            makeGates: { policy, _ in try factory.makeGates(for: policy) })
        let bound = try service.start()
        defer {
            let semaphore = DispatchSemaphore(value: 0)
            server.shutdown(drainTimeout: .seconds(2)) { _ in semaphore.signal() }
            _ = semaphore.wait(timeout: .now() + 5)
        }
        let port = try #require(bound.first { $0.listener == GatewayService.mainListener }?.address.port)
        let base = "http://127.0.0.1:\(port)"

        // Challenge and attestation over HTTP/2 too.
        let (_, issued) = try Self.curl(["-X", "POST", base + "/app-attest/challenge"])
        let challenge = try #require(EnforcementServeTests.json(Array(issued.utf8))["challenge"] as? String)
        let device = try SimulatedDevice.generate()
        let attestBody = try EnforcementHarness().attestBody(device, challenge: challenge)
        try Data(attestBody).write(to: URL(fileURLWithPath: directory.path + "/attest.json"))
        let (_, attested) = try Self.curl([
            "-H", "content-type: application/json", "--data-binary", "@" + directory.path + "/attest.json",
            "--write-out", "\\n%{http_code}", base + "/app-attest/attest",
        ])
        #expect(attested.hasSuffix("\n201"), "\(attested)")

        let (_, second) = try Self.curl(["-X", "POST", base + "/app-attest/challenge"])
        let premiumChallenge = try #require(EnforcementServeTests.json(Array(second.utf8))["challenge"] as? String)
        let body = Array("{\"buy\":1}".utf8)
        try Data(body).write(to: URL(fileURLWithPath: directory.path + "/body.json"))
        let signed = try EnforcementHarness.signed(
            device, counter: 1, method: "POST", target: "/v1/premium/buy?sku=7", body: body,
            challenge: premiumChallenge)
        var arguments: [String] = []
        for field in signed.headers.fields where field.name != "Host" {
            arguments += ["-H", "\(field.name.lowercased()): \(field.value)"]
        }
        arguments += [
            "--data-binary", "@" + directory.path + "/body.json", "--write-out", "\\n%{http_version} %{http_code}",
            base + "/v1/premium/buy?sku=7",
        ]
        let (_, forwarded) = try Self.curl(arguments)
        #expect(forwarded.hasSuffix("\n2 200"), "\(forwarded)")
        let echo = EnforcementServeTests.json(
            Array(forwarded.split(separator: "\n").first.map { Array($0.utf8) } ?? []))
        #expect(echo["target"] as? String == "/v1/premium/buy?sku=7")
        #expect(echo["body_sha256"] as? String == SHA256.hash(body).hexString)
        let upstreamHeaders = (echo["headers"] as? [[String]] ?? [])
        #expect(upstreamHeaders.contains(["X-App-Attest-Status", "verified"]), "\(upstreamHeaders)")
        #expect(!upstreamHeaders.contains { $0[0].lowercased() == "x-app-assertion" })

        // The same request again: the code HTTP/1.1 gets.
        let (_, replay) = try Self.curl(arguments)
        #expect(replay.hasSuffix("\n2 401"), "\(replay)")
        let code =
            EnforcementServeTests.json(Array(replay.split(separator: "\n").first.map { Array($0.utf8) } ?? []))[
                "error"] as? String
        #expect(code == "challenge_invalid" || code == "counter_replay", "\(replay)")

        // No assertion at all: 401 assertion_missing; as gRPC: grpc-status 16 with the code.
        let (_, missing) = try Self.curl(["--write-out", "\\n%{http_code}", base + "/v1/premium/item"])
        #expect(missing.contains("\"assertion_missing\"") && missing.hasSuffix("\n401"), "\(missing)")
        let (_, grpc) = try Self.curl([
            "--include", "-H", "content-type: application/grpc", "-H", "te: trailers", "--data-binary", "",
            base + "/v1/premium/pkg.Service/Buy",
        ])
        #expect(grpc.hasPrefix("HTTP/2 200"), "\(grpc)")
        #expect(grpc.contains("grpc-status: 16"), "\(grpc)")
        #expect(grpc.contains("grpc-message: assertion_missing"), "\(grpc)")

        // A real gRPC client (grpcio) sees UNAUTHENTICATED with the code as its details.
        let script = Repository.root.appendingPathComponent("scripts/h2/grpc_call.py").path
        let (grpcStatus, called) = try TLSTestPKI.run(
            "/usr/bin/python3", [script, "127.0.0.1:\(port)", "/v1/premium/pkg.Service/Buy"])
        #expect(grpcStatus == 0, "\(called)")
        #expect(
            called.contains(#""code": "UNAUTHENTICATED", "value": 16, "details": "assertion_missing""#), "\(called)")
    }
}
