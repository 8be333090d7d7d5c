import Foundation
import GatewayTesting
import Glibc
import Simulator
import Testing
import Verification

@testable import Enforcement
@testable import GatewayIO
@testable import GatewayServe
@testable import HTTP1
@testable import HTTPProxy
@testable import PolicyModel

/// The gate as `serve` wires it, with a real gRPC server (grpcio) as an `h2c` upstream and a real
/// gRPC client (grpcio): verified unary and server-streaming calls pass with the identity headers,
/// a replayed or missing assertion is 16, and a store outage is 14.
@Suite(.serialized, .timeLimit(.minutes(2))) struct HTTP2UpstreamEnforcementTests {
    /// The server-streaming method: `binding: head` (its body is not hashed).
    static let streamRoute = RoutePolicy(
        name: "stream", match: .init(path: "/test.Echo/Stream", methods: ["POST"]), upstream: "api",
        mode: .enforce, challenge: .required, binding: .head)
    static let grpcRoute = RoutePolicy(
        name: "grpc", match: .init(pathPrefix: "/test.Echo/", methods: ["POST"]), upstream: "api", mode: .enforce,
        challenge: .required, binding: .request)

    /// One gRPC message as grpcio frames it: not compressed, 4-byte length, the bytes.
    static func frame(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8)
        let count = UInt32(bytes.count)
        return [0, UInt8(count >> 24), UInt8((count >> 16) & 0xff), UInt8((count >> 8) & 0xff), UInt8(count & 0xff)]
            + bytes
    }

    static func metadata(_ head: HTTPRequestHead) throws -> String {
        let pairs = head.headers.fields.filter { $0.name != "Host" }.map { [$0.name.lowercased(), $0.value] }
        return String(decoding: try JSONSerialization.data(withJSONObject: pairs), as: UTF8.self)
    }

    struct Served {
        let service: GatewayService
        let server: GatewayServer
        let port: UInt16

        func stop() {
            let semaphore = DispatchSemaphore(value: 0)
            self.server.shutdown(drainTimeout: .seconds(2)) { _ in semaphore.signal() }
            _ = semaphore.wait(timeout: .now() + 5)
        }

        func challenge() throws -> String {
            let (_, issued) = try HTTP2EnforcementTests.curl([
                "-X", "POST", "http://127.0.0.1:\(self.port)/app-attest/challenge",
            ])
            return try #require(EnforcementServeTests.json(Array(issued.utf8))["challenge"] as? String, "\(issued)")
        }

        /// Attests `device` over HTTP/2.
        func attest(_ device: SimulatedDevice, directory: TemporaryDirectory) throws {
            let attestBody = try EnforcementHarness().attestBody(device, challenge: try self.challenge())
            try Data(attestBody).write(to: URL(fileURLWithPath: directory.path + "/attest.json"))
            let (_, attested) = try HTTP2EnforcementTests.curl([
                "-H", "content-type: application/json", "--data-binary", "@" + directory.path + "/attest.json",
                "--write-out", "\\n%{http_code}", "http://127.0.0.1:\(self.port)/app-attest/attest",
            ])
            #expect(attested.hasSuffix("\n201"), "\(attested)")
        }
    }

    static func serve(store: StoreConfiguration, upstreamPort: UInt16, directory: TemporaryDirectory) throws -> Served {
        let rootPath = directory.path + "/root_ca.pem"
        try EnforcementHarness.authority.rootCertificatePEM.write(toFile: rootPath, atomically: true, encoding: .utf8)
        var upstream = UpstreamConfiguration(name: "api", host: "127.0.0.1", port: upstreamPort)
        upstream.wireProtocol = .h2c
        var policy = GatewayPolicy(
            listen: [ListenAddress(host: "127.0.0.1", port: 0)], store: store, appIDs: [EnforcementHarness.appID],
            environment: .production, trustRoots: [rootPath], upstreams: ["api": upstream],
            routes: [Self.streamRoute, Self.grpcRoute] + EnforcementHarness.routes)
        policy.listeners[0].h2c = true
        let served = policy
        let registry = MetricsRegistry()
        let server = try GatewayServer(loopCount: 1, metrics: registry, accessLog: nil)
        let factory = EnforcementGateFactory(registry: registry)
        let service = GatewayService(
            configPath: "<test>", server: server, load: { _ in served },
            makeGates: { policy, _ in try factory.makeGates(for: policy) })
        let bound = try service.start()
        let port = try #require(bound.first { $0.listener == GatewayService.mainListener }?.address.port)
        return Served(service: service, server: server, port: port)
    }

    @Test func verifiedCallsPassAReplayedOrMissingAssertionIsUnauthenticated() throws {
        let upstream = try GRPCUpstreamProcess()
        defer { upstream.stop() }
        let directory = try TemporaryDirectory()
        let served = try Self.serve(store: .memory, upstreamPort: upstream.port, directory: directory)
        defer { served.stop() }
        let device = try SimulatedDevice.generate()
        try served.attest(device, directory: directory)

        // Unary, signed over the one framed message (binding: request).
        let signed = try EnforcementHarness.signed(
            device, counter: 1, method: "POST", target: "/test.Echo/Unary", body: Self.frame("hello"),
            challenge: try served.challenge())
        let metadata = try Self.metadata(signed)
        let unary = try HTTP2UpstreamTests.call(
            served.port, "/test.Echo/Unary", "unary", body: "hello", metadata: metadata)
        #expect(unary["code"] as? String == "OK", "\(unary)")
        let echoed = try #require(
            try JSONSerialization.jsonObject(with: Data((unary["response"] as? String ?? "").utf8)) as? [String: Any])
        let seen = try #require(echoed["metadata"] as? [[String]])
        #expect(seen.contains(["x-app-attest-status", "verified"]), "\(seen)")
        #expect(!seen.contains { $0[0] == "x-app-assertion" }, "\(seen)")

        // The same call again: 16 with HTTP/1.1's code.
        let replay = try HTTP2UpstreamTests.call(
            served.port, "/test.Echo/Unary", "unary", body: "hello", metadata: metadata)
        #expect(replay["code"] as? String == "UNAUTHENTICATED", "\(replay)")
        let code = replay["details"] as? String
        #expect(code == "challenge_invalid" || code == "counter_replay", "\(replay)")

        // No assertion: 16 assertion_missing.
        let missing = try HTTP2UpstreamTests.call(served.port, "/test.Echo/Unary", "unary", body: "hello")
        #expect(missing["code"] as? String == "UNAUTHENTICATED", "\(missing)")
        #expect(missing["details"] as? String == "assertion_missing", "\(missing)")

        // Server streaming on the binding: head route: the assertion signs method, target and
        // challenge (docs/protocol.md "binding: head"); every message and the OK status arrive.
        let headChallenge = try served.challenge()
        let headSigned = try EnforcementHarness.signed(
            device, counter: 2,
            clientData: ClientData.canonicalHead(method: "POST", target: "/test.Echo/Stream", challenge: headChallenge),
            method: "POST", target: "/test.Echo/Stream", challengeHeader: headChallenge)
        let streamed = try HTTP2UpstreamTests.call(
            served.port, "/test.Echo/Stream", "stream", body: "4", metadata: try Self.metadata(headSigned))
        #expect(streamed["code"] as? String == "OK", "\(streamed)")
        #expect(streamed["response"] as? [String] == ["0", "1", "2", "3"], "\(streamed)")

        // A binding: request assertion on the head route, and a head assertion on the request
        // route: both refused (16), neither binding's assertion passes on the other.
        let requestStyle = try EnforcementHarness.signed(
            device, counter: 3, method: "POST", target: "/test.Echo/Stream", body: Self.frame("4"),
            challenge: try served.challenge())
        let crossed = try HTTP2UpstreamTests.call(
            served.port, "/test.Echo/Stream", "stream", body: "4", metadata: try Self.metadata(requestStyle))
        #expect(crossed["code"] as? String == "UNAUTHENTICATED", "\(crossed)")
        #expect(crossed["details"] as? String == "invalid_signature", "\(crossed)")
        let unaryChallenge = try served.challenge()
        let headStyle = try EnforcementHarness.signed(
            device, counter: 4,
            clientData: ClientData.canonicalHead(method: "POST", target: "/test.Echo/Unary", challenge: unaryChallenge),
            method: "POST", target: "/test.Echo/Unary", challengeHeader: unaryChallenge)
        let crossedBack = try HTTP2UpstreamTests.call(
            served.port, "/test.Echo/Unary", "unary", body: "hello", metadata: try Self.metadata(headStyle))
        #expect(crossedBack["code"] as? String == "UNAUTHENTICATED", "\(crossedBack)")
        #expect(crossedBack["details"] as? String == "invalid_signature", "\(crossedBack)")
    }

    @Test func aStoreOutageIsUnavailable() throws {
        let upstream = try GRPCUpstreamProcess()
        defer { upstream.stop() }
        let redis = try RedisServer.start()
        defer { redis.shutDown() }
        let directory = try TemporaryDirectory()
        let served = try Self.serve(
            store: .redis(url: redis.urlString()), upstreamPort: upstream.port, directory: directory)
        defer { served.stop() }
        let device = try SimulatedDevice.generate()
        try served.attest(device, directory: directory)
        let signed = try EnforcementHarness.signed(
            device, counter: 1, method: "POST", target: "/test.Echo/Unary", body: Self.frame("x"),
            challenge: try served.challenge())
        try redis.stop()
        let down = try HTTP2UpstreamTests.call(
            served.port, "/test.Echo/Unary", "unary", body: "x", metadata: try Self.metadata(signed))
        #expect(down["code"] as? String == "UNAVAILABLE", "\(down)")
        #expect(down["details"] as? String == "store_error", "\(down)")
    }
}
