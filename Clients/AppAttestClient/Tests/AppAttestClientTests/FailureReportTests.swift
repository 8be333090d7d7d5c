import Foundation
import Testing

@testable import AppAttestClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The client reports its App Attest failures (issue 34): each `DCError` kind as DeviceCheck's
/// code, and, against the real gateway, counted in its metrics while enrollment carries on.
@Suite(.serialized)
struct FailureReportTests {
    @Test func eachKindIsSentAsDeviceChecksCodeAndNothingElse() throws {
        let kinds: [(AppAttestServiceError.Kind, Int)] = [
            (.unknownSystemFailure, 0), (.featureUnsupported, 1), (.invalidInput, 2), (.invalidKey, 3),
            (.serverUnavailable, 4),
        ]
        for (kind, code) in kinds {
            let body = AttestationFailureReporter.body(for: AppAttestServiceError(kind, "details stay on the device"))
            let object = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
            #expect(object["platform"] as? String == "ios")
            #expect(object["domain"] as? String == "com.apple.devicecheck.error")
            #expect(object["code"] as? Int == code)
            #expect(object.count == 3, "no message, no key ID: \(object)")
        }
    }

    @Test func anAttestationFailureIsCountedByTheGateway() async throws {
        let environment = try await GatewayEnvironment(challengeTTLSeconds: 300)
        defer { environment.shutDown() }
        let service = environment.simulator()
        // Apple unreachable once: the client reports it, retries, and enrolls.
        service.failNextAttestations([AppAttestServiceError(.serverUnavailable, "offline")])
        let client = environment.client(service: service, keyStore: InMemoryKeyStore())
        let (_, response) = try await client.data(for: URLRequest(url: environment.url("/v1/items")))
        #expect(response.statusCode == 200)
        let series = #"attest_gateway_client_reported_failures_total{platform="ios",code="dc_server_unavailable"} 1"#
        let counted = await eventually(timeout: .seconds(10)) {
            guard
                let (data, _) = try? await GatewayEnvironment.get("http://127.0.0.1:\(environment.adminPort)/metrics")
            else { return false }
            return String(decoding: data, as: UTF8.self).contains(series)
        }
        #expect(counted, "the gateway's /metrics has \(series)")
    }
}
