import Foundation
import GatewayTesting
import Testing

@testable import GateContract
@testable import HTTP1
@testable import HTTPProxy
@testable import PolicyModel

/// `access_log.key_id` on real access-log lines from a running server, swapped by a reload
/// (the formats themselves: `AccessLogKeyIDTests`).
@Suite struct AccessLogKeyIDIntegrationTests {
    static let keyID = "ZmFrZS1rZXktaWQtZm9yLXRoZS1sb2c="
    static let hashKey = Array("log-key-for-the-tests-32-bytes!!".utf8)

    /// Real lines from a running server: the format in force is the one last installed.
    @Test func accessLogLinesFollowTheInstalledFormat() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(
            upstreams: ["api": upstream.configuration], gate: KeyIDTestGate(keyID: Self.keyID), loops: 1,
            accessLog: true)
        defer { gateway.stop() }
        func keyIDLogged(after count: Int) throws -> Any? {
            _ = try TestHTTPClient.request(port: gateway.port, "GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
            var lines: [String] = []
            let deadline = ContinuousClock.now + .seconds(5)
            while lines.count <= count, ContinuousClock.now < deadline {
                lines = gateway.accessLogLines()
                usleep(20_000)
            }
            let line = try #require(lines.count > count ? lines[count] : nil)
            let entry = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return entry["key_id"]
        }
        #expect(try keyIDLogged(after: 0) as? String == "ZmFrZS1r", "prefix by default")
        gateway.server.update { $0.accessLogKeyID = .hashed(key: Self.hashKey) }
        #expect(try keyIDLogged(after: 1) as? String == "h:b98f872e70e2a671d96fada37bbf3fb2")
        let fullFormat = try AccessLogKeyIDFormat.load(AccessLogPolicy(keyID: .full)).get()
        gateway.server.update { $0.accessLogKeyID = fullFormat }
        #expect(try keyIDLogged(after: 2) as? String == Self.keyID)
        let omittedFormat = try AccessLogKeyIDFormat.load(AccessLogPolicy(keyID: .omitted)).get()
        gateway.server.update { $0.accessLogKeyID = omittedFormat }
        #expect(try keyIDLogged(after: 3) is NSNull)
    }
}

/// Forwards every request, naming `keyID` as the request's key (what the attest gate does).
struct KeyIDTestGate: RequestGate {
    let keyID: String

    func classify(_ head: HTTPRequestHead, client: String) -> GateClassification {
        GateClassification(routeName: "keyed", upstream: "api", bufferBodyUpTo: nil)
    }

    func decide(
        _ head: HTTPRequestHead, body: [UInt8]?, classification: GateClassification,
        promise: GateDecisionPromise
    ) {
        promise.succeed(.forward(head, GateLogInfo(verdict: .verified, keyID: self.keyID)))
    }
}
