import Foundation
import GatewayTesting
import Simulator
import Testing
import Verification

@testable import AppleClient
@testable import OutboundHTTP

/// `scripts/fake-apple.py` behaves as Apple documents, proven over real TLS with the
/// gateway's own request builders, JWT signer, response reader and answer decoders (only the
/// socket is the script's blocking client; the gateway's HTTPS client comes with the TLS layer).
@Suite(.serialized) struct FakeAppleServerTests {
    /// base64 of `DEVICE:NONCE`: the fake's convention for tokens of one device.
    static func token(_ device: String, _ nonce: Int = 0) -> String {
        Data("\(device):\(nonce)".utf8).base64EncodedString()
    }

    static func deviceCheck(
        _ fake: FakeAppleServer, _ operation: DeviceCheckOperation, _ token: String, bits: (Bool, Bool)? = nil,
        jwt: String? = nil
    ) throws -> Result<DeviceCheckAnswer, AppleError> {
        let request: OutboundHTTPRequest
        switch operation {
        case .query:
            request = try DeviceCheckRequest.query(
                deviceToken: token, timestamp: Date(), environment: .production, override: fake.override)
        case .validate:
            request = try DeviceCheckRequest.validate(
                deviceToken: token, timestamp: Date(), environment: .development, override: fake.override)
        case .update:
            request = try DeviceCheckRequest.update(
                deviceToken: token, bit0: bits?.0 ?? false, bit1: bits?.1 ?? false, timestamp: Date(),
                environment: .production, override: fake.override)
        }
        let response = try #require(try fake.send(request, jwt: jwt))
        return Result { () throws(AppleError) in
            try DeviceCheckAnswer.decode(operation, status: response.status, body: response.body)
        }
    }

    @Test func twoBitsPerDeviceThroughQueryUpdateAndValidate() throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        #expect(try Self.deviceCheck(fake, .validate, Self.token("phone-a")).get() == .accepted)
        #expect(try Self.deviceCheck(fake, .query, Self.token("phone-a")).get() == .bitsNeverSet)
        #expect(try Self.deviceCheck(fake, .update, Self.token("phone-a", 1), bits: (true, false)).get() == .accepted)
        let month = String(ISO8601DateFormatter().string(from: Date()).prefix(7))
        #expect(
            try Self.deviceCheck(fake, .query, Self.token("phone-a", 2)).get()
                == .bits(DeviceCheckBits(bit0: true, bit1: false, lastUpdateTime: month)))
        #expect(try Self.deviceCheck(fake, .query, Self.token("phone-b")).get() == .bitsNeverSet)
    }

    @Test func badJWTsAre401() throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let now = Date()
        let other = try AppleTestKeys()
        defer { other.remove() }
        let wrongKey = try AppleJWT.load(
            teamID: FakeAppleServer.teamID, keyID: FakeAppleServer.keyID, privateKeyFile: other.p8)
        let tokens = [
            try wrongKey.token(issuedAt: now),
            try fake.signer(keyID: "OTHERKEY12").token(issuedAt: now),
            try fake.signer(teamID: "ZZZZZ99999").token(issuedAt: now),
            try fake.signer().token(issuedAt: now.addingTimeInterval(-3601)),
            try fake.signer().token(issuedAt: now.addingTimeInterval(600)),
            "not.a.jwt",
        ]
        for token in tokens {
            let result = try Self.deviceCheck(fake, .query, Self.token("phone"), jwt: token)
            #expect(throws: AppleError(.unauthorized, "")) { try result.get() }
        }
        // A token 59 minutes old still passes: the cache's 30-minute re-signing is well inside.
        let aged = try fake.signer().token(issuedAt: now.addingTimeInterval(-59 * 60))
        #expect(try Self.deviceCheck(fake, .query, Self.token("phone"), jwt: aged).get() == .bitsNeverSet)
    }

    @Test func malformedBodiesAre400WithApplesText() throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let invalid = Data("invalid-token".utf8).base64EncodedString()
        let result = try Self.deviceCheck(fake, .query, invalid)
        guard case .failure(let error) = result else {
            Issue.record("an invalid token passed")
            return
        }
        #expect(error.code == .badRequest && error.reason.contains("device token"))
        let endpoint = OutboundHTTPEndpoint.deviceCheck(.update, environment: .production, override: fake.override)
        for body in [
            "{", "[]", #"{"device_token":"cGhvbmU6MQ==","transaction_id":"x"}"#,
            #"{"device_token":"cGhvbmU6MQ==","transaction_id":"x","timestamp":1,"bit0":"yes"}"#,
        ] {
            let request = OutboundHTTPRequest(
                endpoint: endpoint, contentType: "application/json", authorizationPrefix: "Bearer ",
                body: Array(body.utf8))
            let response = try #require(try fake.send(request))
            #expect(response.status == 400, "\(body)")
        }
    }

    @Test func attestationDataAnswersFromItsScript() throws {
        let vector = try FakeAppleServer.receiptVector("rcpt-02")
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let receiptFile = try fake.receiptFile(for: vector)
        try fake.control(
            "/_fake/script",
            #"[{"status":200,"receipt_file":"\#(receiptFile)"},{"status":304},{"status":404},"#
                + #"{"status":429,"retry_after":7},{"status":503},{"status":404}]"#)
        let request = try FraudRiskRequest.make(receipt: [1, 2, 3], environment: .production, override: fake.override)

        let first = try #require(try fake.send(request))
        guard case .receipt(let receipt) = try FraudRiskAnswer.decode(status: first.status, body: first.body) else {
            Issue.record("expected a receipt")
            return
        }
        let publicKey = try ECPublicKey(pem: try #require(vector["public_key"] as? String))
        let payload = try ReceiptVerifier().verify(
            receipt: receipt, appID: vector["app_id"] as? String, publicKey: publicKey.x962, at: nil)
        #expect(payload.riskMetric != nil)

        let second = try #require(try fake.send(request))
        #expect(try FraudRiskAnswer.decode(status: second.status, body: second.body) == .notModified)
        let third = try #require(try fake.send(request))
        #expect(try FraudRiskAnswer.decode(status: third.status, body: third.body) == .noData)
        let fourth = try #require(try fake.send(request))
        #expect(fourth.retryAfter == .seconds(7))
        #expect(throws: AppleError(.throttled, "")) { try FraudRiskAnswer.decode(status: fourth.status, body: []) }
        let fifth = try #require(try fake.send(request))
        #expect(throws: AppleError(.serverError, "")) { try FraudRiskAnswer.decode(status: fifth.status, body: []) }
        // The last step repeats.
        for _ in 0..<2 {
            let again = try #require(try fake.send(request))
            #expect(again.status == 404)
        }

        // Not base64: 400. No JWT: 401.
        var garbage = request
        garbage.body = Array("@@@".utf8)
        #expect(try fake.send(garbage)?.status == 400)
        #expect(try fake.send(request, jwt: "x.y.z")?.status == 401)
    }

    /// A refreshed receipt minted by the simulator (chosen risk metric and not-before) comes
    /// back from the fake, verifies under the simulator's root with the device's key, and the
    /// refresh policy stores it and waits for its not-before.
    @Test func aSimulatorMintedRefreshedReceiptCompletesARefresh() throws {
        let authority = try SimulatorAuthority.generate()
        let device = try SimulatedDevice.generate()
        let appID = "ABCDE12345.com.example.app"
        let attestation = try authority.attestation(
            for: device, appID: appID, clientDataHash: [1], environment: .production)
        let verifier = try ReceiptVerifier(additionalTrustRootsPEM: [authority.rootCertificatePEM])
        let attested = try verifier.verify(
            receipt: try AttestationObject(attestation).receipt, appID: appID, publicKey: device.publicKey, at: nil)
        let now = Date()
        var options = ReceiptOptions()
        options.type = .receipt
        options.riskMetric = 42
        options.creationTime = now
        options.notBefore = now.addingTimeInterval(3 * 86_400)
        options.chunkSize = nil
        let minted = try authority.receipt(
            attestedCertificate: attested.attestedCertificate, appID: appID, clientHash: [1],
            environment: .production, options: options)

        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let file = fake.keys.directory + "/refreshed.der"
        try Data(minted).write(to: URL(fileURLWithPath: file))
        try fake.control("/_fake/script", #"[{"status":200,"receipt_file":"\#(file)"}]"#)
        let request = try FraudRiskRequest.make(
            receipt: try AttestationObject(attestation).receipt, environment: .production, override: fake.override)
        let response = try #require(try fake.send(request))
        guard case .receipt(let receipt) = try FraudRiskAnswer.decode(status: response.status, body: response.body)
        else {
            Issue.record("expected a receipt")
            return
        }
        let payload = try verifier.verify(receipt: receipt, appID: appID, publicKey: device.publicKey, at: nil)
        #expect(payload.riskMetric == 42 && payload.type == .receipt)
        var state = FraudRiskRefresh(attestedAt: now, receipt: attested)
        let action = state.handle(.refreshed(receipt: receipt, payload: payload), at: now, jitter: 0)
        #expect(action == .storeReceipt(receipt, nextAttempt: payload.notBefore!))
        #expect(state.riskMetric == 42)
    }

    /// A raw DER receipt file is sent as it is: the fake once trimmed whitespace from any file,
    /// and a DER receipt whose signature ended in 0x0a or 0x20 came back one byte short
    /// (`aSimulatorMintedRefreshedReceiptCompletesARefresh` failed about one run in 40).
    @Test(arguments: [UInt8(0x0a), 0x20, 0x09, 0x0d]) func aRawReceiptEndingInAWhitespaceByteIsSentWhole(last: UInt8)
        throws
    {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let raw: [UInt8] = [0x30, 0x82, 0x01, 0x00] + (0..<252).map { UInt8(truncatingIfNeeded: $0 &* 7) } + [last]
        let file = fake.keys.directory + "/whitespace-end.der"
        try Data(raw).write(to: URL(fileURLWithPath: file))
        try fake.control("/_fake/script", #"[{"status":200,"receipt_file":"\#(file)"}]"#)
        let request = try FraudRiskRequest.make(
            receipt: [0x30, 0x00], environment: .production, override: fake.override)
        let response = try #require(try fake.send(request))
        #expect(response.status == 200)
        #expect(Data(base64Encoded: Data(response.body)).map(Array.init) == raw)
    }

    @Test func itCanBeSlowThrottlingOrDown() throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let request = try DeviceCheckRequest.query(
            deviceToken: Self.token("phone"), timestamp: Date(), environment: .production, override: fake.override)

        try fake.control("/_fake/mode", #"{"status":429,"retry_after":30}"#)
        let throttled = try #require(try fake.send(request))
        #expect(throttled.status == 429 && throttled.retryAfter == .seconds(30))

        try fake.control("/_fake/mode", #"{"delay":0.4}"#)
        let start = ContinuousClock.now
        #expect(try fake.send(request)?.status == 200)
        #expect(ContinuousClock.now - start >= .milliseconds(400))

        try fake.control("/_fake/mode", #"{"down":true}"#)
        #expect(try fake.send(request) == nil, "closed without an answer: the client's apple_unreachable")

        try fake.control("/_fake/mode", "{}")
        #expect(try fake.send(request)?.status == 200)
    }

    @Test func tlsIsRealTheCertificateMustChainToTheTestCA() throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let other = try AppleTestKeys()
        defer { other.remove() }
        try AppleTestKeys.openssl([
            "req", "-x509", "-new", "-key", other.p8, "-subj", "/CN=other CA", "-days", "1", "-out",
            other.directory + "/ca.pem",
        ])
        let request = try DeviceCheckRequest.validate(
            deviceToken: Self.token("phone"), timestamp: Date(), environment: .production, override: fake.override)
        let bytes = request.serialized(token: try fake.signer().token(issuedAt: Date()))
        #expect(throws: TestFailure.self) { try fake.exchange(bytes, caFile: other.directory + "/ca.pem") }
        #expect(try fake.exchange(bytes)?.status == 200)
    }
}
