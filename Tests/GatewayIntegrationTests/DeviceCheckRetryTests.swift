import Foundation
import GatewayTesting
import Testing

@testable import AppleClient
@testable import OutboundHTTP

/// `DeviceCheckClient` against `scripts/fake-apple.py` over real TLS: a 503 or a 429 is sent
/// again (Apple's `Retry-After` honoured) and the call succeeds once the fake recovers; a final
/// answer is not; the deadline bounds the retries.
@Suite(.serialized, .timeLimit(.minutes(1))) struct DeviceCheckRetryTests {
    /// A 20 s call deadline: on a loaded machine the fake's first answer (its pure-Python JWT
    /// check) can take seconds, and the deadline must not be what ends the retries here.
    func deviceCheck(_ fake: FakeAppleServer, _ harness: OutboundHTTPClientTests.Harness) -> DeviceCheckClient {
        var configuration = AppleConfiguration(
            teamID: FakeAppleServer.teamID, keyID: FakeAppleServer.keyID, privateKeyFile: fake.keys.p8,
            environment: .production, deviceCheckOverride: OutboundOrigin(host: "127.0.0.1", port: fake.port),
            caFile: fake.caFile)
        configuration.deviceCheck.timeout = .seconds(20)
        return DeviceCheckClient(client: harness.client, configuration: configuration)
    }

    @Test func failuresThatHealAreRetriedAndTheCallSucceeds() async throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let harness = try OutboundHTTPClientTests.Harness(fake)
        defer { harness.stop() }
        let client = self.deviceCheck(fake, harness)

        try fake.control("/_fake/mode", #"{"status":503,"times":2}"#)
        let answer = await client.call(.validate, deviceToken: FakeAppleServerTests.token("phone"))
        #expect(throws: Never.self) { try answer.get() }
        #expect(try fake.requestLog().filter { $0.path == "/v1/validate_device_token" }.count == 3)
        #expect(harness.metric(#"attest_gateway_apple_retries_total{service="devicecheck"} 2"#))

        // Retry-After: 1 is waited for, not cut short by the client's own backoff.
        try fake.control("/_fake/mode", #"{"status":429,"retry_after":1,"times":1}"#)
        let started = ContinuousClock.now
        let second = await client.call(.validate, deviceToken: FakeAppleServerTests.token("phone"))
        #expect(throws: Never.self) { try second.get() }
        #expect(ContinuousClock.now - started >= .seconds(1))
    }

    @Test func finalAnswersAreNotRetriedAndTheDeadlineEndsRetries() async throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let harness = try OutboundHTTPClientTests.Harness(fake)
        defer { harness.stop() }
        let client = self.deviceCheck(fake, harness)

        let refused = await client.call(.validate, deviceToken: FakeAppleServerTests.token("invalid"))
        #expect(throws: AppleError(.badRequest, "")) { try refused.get() }
        #expect(try fake.requestLog().count == 1)

        // Apple keeps failing: three attempts at most, then its answer.
        try fake.control("/_fake/mode", #"{"status":503}"#)
        let failing = await client.call(.validate, deviceToken: FakeAppleServerTests.token("phone"))
        #expect(throws: AppleError(.serverError, "")) { try failing.get() }
        #expect(try fake.requestLog().count == 4)

        // A Retry-After beyond the 20 s timeout: answered at once, not waited for.
        try fake.control("/_fake/mode", #"{"status":429,"retry_after":30}"#)
        let started = ContinuousClock.now
        let throttled = await client.call(.validate, deviceToken: FakeAppleServerTests.token("phone"))
        #expect(throws: AppleError(.throttled, "")) { try throttled.get() }
        #expect(ContinuousClock.now - started < .seconds(3))
        #expect(try fake.requestLog().count == 5)
    }
}
