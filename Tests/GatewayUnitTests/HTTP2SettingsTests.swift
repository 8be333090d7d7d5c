import Foundation
import Testing

@testable import GateContract
@testable import GatewayIO
@testable import HTTPProxy
@testable import PolicyModel

/// The listener keys that turn HTTP/2 on or off, the flood counters, and the gRPC answers.
@Suite struct HTTP2SettingsTests {
    typealias Directory = ListenerTLSPolicyTests.PolicyDirectory

    @Test func tlsListenersOfferH2ByDefaultAndPlainOnesDoNot() throws {
        let directory = try Directory()
        defer { directory.remove() }
        let listen = """
              - "127.0.0.1:8080"
              - { address: "127.0.0.1:8081", h2c: true }
              - address: "0.0.0.0:8443"
                tls: { certificate: certs/fullchain.pem, private_key: certs/key.pem }
              - address: "0.0.0.0:8444"
                tls: { certificate: certs/fullchain.pem, private_key: certs/key.pem, http2: false }
            """
        let policy = try directory.load(ListenerTLSPolicyTests.policy(listen: listen))
        #expect(policy.listeners.map(\.h2c) == [false, true, false, false])
        #expect(policy.listeners.map { $0.tls?.http2 } == [nil, nil, true, false])
        #expect(policy.listeners[1].description == "127.0.0.1:8081 (h2c)")
        let offered = try #require(policy.listeners[2].tls)
        #expect(TLSServerSettings(listener: offered).offersHTTP2)
        #expect(!TLSServerSettings(listener: try #require(policy.listeners[3].tls)).offersHTTP2)
    }

    @Test func h2cOnATLSListenerIsRefusedNamingTheField() throws {
        let directory = try Directory()
        defer { directory.remove() }
        let listen = """
              - address: "0.0.0.0:8443"
                h2c: true
                tls: { certificate: certs/fullchain.pem, private_key: certs/key.pem }
            """
        let error = try #require(directory.error(ListenerTLSPolicyTests.policy(listen: listen)))
        #expect(error.description.contains("h2c"), "\(error)")
        #expect(error.description.contains("policies.yaml"), "\(error)")
        #expect(error.line == 4, "\(error)")  // the h2c line
    }

    @Test func h2cMustBeABoolean() throws {
        let directory = try Directory()
        defer { directory.remove() }
        let listen = "  - { address: \"127.0.0.1:8081\", h2c: sometimes }"
        let error = try #require(directory.error(ListenerTLSPolicyTests.policy(listen: listen)))
        #expect(error.description.contains("h2c"), "\(error)")
    }

    // MARK: - Flood guard

    @Test(arguments: [
        (HTTP2FrameKind.ping, HTTP2FloodGuard.Flood.ping, 50), (.settings, .settings, 50), (.priority, .priority, 500),
        (.rstStream, .reset, 100), (.windowUpdate, .windowUpdate, 10_000),
    ])
    func eachKindHasItsLimitPerSecond(_ kind: HTTP2FrameKind, _ flood: HTTP2FloodGuard.Flood, _ limit: Int) {
        var guardValue = HTTP2FloodGuard()
        let start: UInt64 = 5_000_000_000
        for index in 0..<limit {
            #expect(guardValue.received(kind, isAck: false, length: 8, at: start + UInt64(index)) == nil)
        }
        #expect(guardValue.received(kind, isAck: false, length: 8, at: start + UInt64(limit)) == flood)
    }

    @Test func theWindowStartsOverAfterASecond() {
        var guardValue = HTTP2FloodGuard()
        for index in 0..<50 { _ = guardValue.received(.ping, isAck: false, length: 8, at: UInt64(index)) }
        #expect(guardValue.received(.ping, isAck: false, length: 8, at: 1_000_000_001) == nil)
    }

    @Test func acknowledgementsAndDataWithBytesAreNotCounted() {
        var guardValue = HTTP2FloodGuard()
        for index in 0..<10_000 {
            #expect(guardValue.received(.ping, isAck: true, length: 8, at: UInt64(index)) == nil)
            #expect(guardValue.received(.settings, isAck: true, length: 0, at: UInt64(index)) == nil)
            #expect(guardValue.received(.data, isAck: false, length: 100, at: UInt64(index)) == nil)
            #expect(guardValue.received(.headers, isAck: false, length: 100, at: UInt64(index)) == nil)
        }
        var empty = HTTP2FloodGuard()
        for index in 0..<200 { _ = empty.received(.data, isAck: false, length: 0, at: UInt64(index)) }
        #expect(empty.received(.data, isAck: false, length: 0, at: 300) == .emptyData)
    }

    // MARK: - gRPC answers

    static func refusal(_ status: Int, _ code: String) -> GRPCRefusal {
        GRPCRefusal(LocalResponse.jsonError(status: status, code: code, message: "m"))
    }

    @Test func theFourStatusesTheIssueNames() {
        #expect(Self.refusal(401, "assertion_missing").status == .unauthenticated)
        #expect(Self.refusal(401, "counter_replay").status == .unauthenticated)
        #expect(Self.refusal(428, "challenge_missing").status == .unauthenticated)
        #expect(Self.refusal(403, "risk_metric_exceeded").status == .permissionDenied)
        #expect(Self.refusal(429, "rate_limited").status == .resourceExhausted)
        #expect(Self.refusal(413, "body_too_large").status == .resourceExhausted)
        #expect(Self.refusal(503, "body_budget_exhausted").status == .resourceExhausted)
        #expect(Self.refusal(503, "store_error").status == .unavailable)
        #expect(Self.refusal(502, "upstream_unavailable").status == .unavailable)
        #expect(Self.refusal(404, "no_route").status == .unimplemented)
        #expect(Self.refusal(400, "ambiguous_target").status == .invalidArgument)
    }

    @Test func theAnswerIsTrailersOnlyWithTheStableCode() {
        let refusal = Self.refusal(401, "invalid_signature")
        #expect(refusal.code == "invalid_signature")
        #expect(refusal.headers.map(\.0) == ["content-type", "grpc-status", "grpc-message"])
        #expect(refusal.headers.map(\.1) == ["application/grpc", "16", "invalid_signature"])
    }

    @Test func aBodyThatIsNotTheGatewaysJSONGivesTheStatusAsCode() {
        let refusal = GRPCRefusal(LocalResponse(status: 403, body: Array("nope".utf8)))
        #expect(refusal.code == "http_403")
        #expect(refusal.status == .permissionDenied)
        #expect(GRPCRefusal.errorCode(in: Array(#"{"error":"a\"b"}"#.utf8)) == nil)
    }
}
