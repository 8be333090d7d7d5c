import Foundation
import GatewayTesting
import Glibc
import Testing
import Verification

@testable import AppleClient
@testable import GatewayIO
@testable import OutboundHTTP

/// `OutboundHTTPClient` on a real event loop against `scripts/fake-apple.py` over real TLS (a
/// throwaway CA in `ca_file`): every documented answer, keep-alive reuse, and each way a call
/// can fail without an answer (timeout, TLS, refused, closed).
@Suite(.serialized) struct OutboundHTTPClientTests {
    /// A client on its own loop, trusting the fake's CA (or `caFile`), signing with the fake's key.
    final class Harness: @unchecked Sendable {
        let loop: EventLoop
        let client: OutboundHTTPClient
        let registry = MetricsRegistry()

        init(_ fake: FakeAppleServer, caFile: String?? = .none, signer: AppleJWT? = nil) throws {
            self.loop = try EventLoop(index: 0)
            let jwt = AppleJWTCache(signer: try signer ?? fake.signer())
            let ca: String? = caFile ?? fake.caFile
            self.client = try OutboundHTTPClient(
                loops: [self.loop], tokens: jwt, caFile: ca,
                metrics: OutboundClientMetrics(registry: self.registry, peer: .apple))
        }

        func stop() {
            let done = DispatchSemaphore(value: 0)
            self.client.shutdown {
                self.loop.execute {
                    self.loop.close()
                    done.signal()
                }
            }
            done.wait()
        }

        func metric(_ line: String) -> Bool { self.registry.render().contains(line) }
    }

    /// The fake's address as an IP literal (its certificate names 127.0.0.1 too).
    static func override(_ fake: FakeAppleServer) -> OutboundOrigin {
        OutboundOrigin(host: "127.0.0.1", port: fake.port)
    }

    static func query(_ fake: FakeAppleServer, device: String = "phone") throws -> OutboundHTTPRequest {
        try DeviceCheckRequest.query(
            deviceToken: FakeAppleServerTests.token(device), timestamp: Date(), environment: .production,
            override: Self.override(fake))
    }

    @Test func deviceCheckOverOneKeptAliveConnection() async throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let harness = try Harness(fake)
        defer { harness.stop() }
        let client = harness.client
        let token = FakeAppleServerTests.token("phone-a")
        let override = Self.override(fake)

        let validate = try DeviceCheckRequest.validate(
            deviceToken: token, timestamp: Date(), environment: .production, override: override)
        var response = try await client.send(validate, timeout: .seconds(5)).get()
        #expect(try DeviceCheckAnswer.decode(.validate, status: response.status, body: response.body) == .accepted)

        response = try await client.send(Self.query(fake, device: "phone-a"), timeout: .seconds(5)).get()
        #expect(try DeviceCheckAnswer.decode(.query, status: response.status, body: response.body) == .bitsNeverSet)
        #expect(response.body == Array("Failed to find bit state".utf8))

        let update = try DeviceCheckRequest.update(
            deviceToken: token, bit0: false, bit1: true, timestamp: Date(), environment: .production, override: override
        )
        response = try await client.send(update, timeout: .seconds(5)).get()
        #expect(try DeviceCheckAnswer.decode(.update, status: response.status, body: response.body) == .accepted)

        response = try await client.send(Self.query(fake, device: "phone-a"), timeout: .seconds(5)).get()
        guard case .bits(let bits) = try DeviceCheckAnswer.decode(.query, status: response.status, body: response.body)
        else {
            Issue.record("expected bits")
            return
        }
        #expect(!bits.bit0 && bits.bit1)

        // Four calls, one socket.
        let state = await client.connectionState(to: validate.endpoint)
        #expect(state.isConnected && state.opened == 1)
        #expect(harness.metric(#"attest_gateway_apple_requests_total{service="devicecheck",outcome="200"} 4"#))
        #expect(harness.metric(#"attest_gateway_apple_request_duration_seconds_count{service="devicecheck"} 4"#))
    }

    @Test func aBadDeviceTokenIs400WithApplesText() async throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let harness = try Harness(fake)
        defer { harness.stop() }
        let request = try DeviceCheckRequest.query(
            deviceToken: Data("invalid:1".utf8).base64EncodedString(), timestamp: Date(), environment: .production,
            override: Self.override(fake))
        let response = try await harness.client.send(request, timeout: .seconds(5)).get()
        #expect(response.status == 400)
        #expect(throws: AppleError(.badRequest, "")) {
            try DeviceCheckAnswer.decode(.query, status: response.status, body: response.body)
        }
    }

    @Test func aRefusedJWTIs401AndTheTokenIsReSigned() async throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let harness = try Harness(fake, signer: try fake.signer(teamID: "ZZZZZ99999"))
        defer { harness.stop() }
        let sent = Date()
        let first = try #require(harness.client.tokens as? AppleJWTCache).token(now: sent)
        let response = try await harness.client.send(Self.query(fake), timeout: .seconds(5)).get()
        #expect(response.status == 401)
        #expect(throws: AppleError(.unauthorized, "")) {
            try DeviceCheckAnswer.decode(.query, status: response.status, body: response.body)
        }
        // `invalidate` after the 401: the next token is signed anew (a cached one would be
        // returned unchanged two seconds later).
        #expect(try #require(harness.client.tokens as? AppleJWTCache).token(now: sent.addingTimeInterval(2)) != first)
    }

    @Test func everyFraudRiskAnswer() async throws {
        let vector = try FakeAppleServer.receiptVector("rcpt-02")
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let receiptFile = try fake.receiptFile(for: vector)
        try fake.control(
            "/_fake/script",
            #"[{"status":200,"receipt_file":"\#(receiptFile)"},{"status":304},{"status":400},{"status":404},"#
                + #"{"status":429,"retry_after":7},{"status":500},{"status":503}]"#)
        let harness = try Harness(fake)
        defer { harness.stop() }
        let request = try FraudRiskRequest.make(
            receipt: [1, 2, 3], environment: .production, override: Self.override(fake))

        let first = try await harness.client.send(request, timeout: .seconds(5)).get()
        guard case .receipt(let receipt) = try FraudRiskAnswer.decode(status: first.status, body: first.body) else {
            Issue.record("expected a receipt")
            return
        }
        let publicKey = try ECPublicKey(pem: try #require(vector["public_key"] as? String))
        let payload = try ReceiptVerifier().verify(
            receipt: receipt, appID: vector["app_id"] as? String, publicKey: publicKey.x962, at: nil)
        #expect(payload.riskMetric != nil)

        var answers: [Result<FraudRiskAnswer, AppleError>] = []
        var retryAfter: Duration?
        for _ in 0..<6 {
            let response = try await harness.client.send(request, timeout: .seconds(5)).get()
            if response.status == 429 { retryAfter = response.retryAfter }
            answers.append(
                Result { () throws(AppleError) in
                    try FraudRiskAnswer.decode(status: response.status, body: response.body)
                })
        }
        #expect(try answers[0].get() == .notModified)
        #expect(throws: AppleError(.badRequest, "")) { try answers[1].get() }
        #expect(try answers[2].get() == .noData)
        #expect(throws: AppleError(.throttled, "")) { try answers[3].get() }
        #expect(retryAfter == .seconds(7))
        #expect(throws: AppleError(.serverError, "")) { try answers[4].get() }
        #expect(throws: AppleError(.serverError, "")) { try answers[5].get() }
        for status in ["200", "304", "400", "404", "429", "500", "503"] {
            #expect(
                harness.metric(#"attest_gateway_apple_requests_total{service="fraud_risk",outcome="\#(status)"} 1"#))
        }
    }

    @Test func aSlowServerTimesOutAndTheNextCallWorks() async throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let harness = try Harness(fake)
        defer { harness.stop() }
        try fake.control("/_fake/mode", #"{"delay": 3}"#)
        let started = ContinuousClock.now
        let result = await harness.client.send(try Self.query(fake), timeout: .milliseconds(700))
        let elapsed = ContinuousClock.now - started
        #expect(throws: OutboundHTTPError(.timedOut, peer: .apple, "")) { try result.get() }
        #expect(elapsed < .seconds(2))
        #expect(harness.metric(#"outcome="apple_timeout"} 1"#))
        try fake.control("/_fake/mode", "{}")
        let response = try await harness.client.send(Self.query(fake), timeout: .seconds(5)).get()
        #expect(response.status == 200)
    }

    @Test func throttlingAndFailingModesAreAnswers() async throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let harness = try Harness(fake)
        defer { harness.stop() }
        try fake.control("/_fake/mode", #"{"status":429,"retry_after":30}"#)
        var response = try await harness.client.send(Self.query(fake), timeout: .seconds(5)).get()
        #expect(response.status == 429 && response.retryAfter == .seconds(30))
        try fake.control("/_fake/mode", #"{"status":503}"#)
        response = try await harness.client.send(Self.query(fake), timeout: .seconds(5)).get()
        #expect(response.status == 503)
    }

    @Test func aServerThatClosesWithoutAnAnswerIsUnreachable() async throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let harness = try Harness(fake)
        defer { harness.stop() }
        try fake.control("/_fake/mode", #"{"down":true}"#)
        let result = await harness.client.send(try Self.query(fake), timeout: .seconds(5))
        #expect(throws: OutboundHTTPError(.unreachable, peer: .apple, "")) { try result.get() }
    }

    @Test func anUntrustedCertificateIsATLSFailure() async throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        // The system trust store does not know the fake's test CA.
        let harness = try Harness(fake, caFile: .some(nil))
        defer { harness.stop() }
        let result = await harness.client.send(try Self.query(fake), timeout: .seconds(5))
        #expect(throws: OutboundHTTPError(.tlsFailed, peer: .apple, "")) { try result.get() }
        #expect(harness.metric(#"outcome="apple_tls_failed"} 1"#))
    }

    @Test func aRefusedConnectionIsUnreachable() async throws {
        let fake = try FakeAppleServer()
        let port = fake.port
        let harness = try Harness(fake)
        defer { harness.stop() }
        fake.stop()
        let request = try DeviceCheckRequest.query(
            deviceToken: FakeAppleServerTests.token("phone"), timestamp: Date(), environment: .production,
            override: OutboundOrigin(host: "127.0.0.1", port: port))
        let result = await harness.client.send(request, timeout: .seconds(5))
        #expect(throws: OutboundHTTPError(.unreachable, peer: .apple, "")) { try result.get() }
    }

    @Test func anUnknownHostIsUnreachable() async throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let harness = try Harness(fake)
        defer { harness.stop() }
        let request = try DeviceCheckRequest.query(
            deviceToken: FakeAppleServerTests.token("phone"), timestamp: Date(), environment: .production,
            override: OutboundOrigin(host: "no-such-host.invalid", port: 443))
        let result = await harness.client.send(request, timeout: .seconds(5))
        let error = try #require(result.failure)
        #expect(error.code == .unreachable || error.code == .timedOut)
    }
}
