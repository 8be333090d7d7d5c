import Foundation
import GatewayTesting
import Testing

@testable import AppleClient
@testable import OutboundHTTP

@Suite struct AppleRequestTests {
    static let time = Date(timeIntervalSince1970: 1_487_716_472.25)
    static let transaction = UUID(uuidString: "5B737CA6-A4C7-488E-B928-8452960C4BE9")!
    static let token = "wlkCDA2Hy/CfrMqVAShs1BAR/0sAiuRIUm5jQg0a+Q=="

    static func json(_ request: OutboundHTTPRequest) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
    }

    @Test func queryAndValidateCarryTokenTransactionAndMilliseconds() throws {
        for (request, operation) in [
            (
                try DeviceCheckRequest.query(
                    deviceToken: Self.token, transactionID: Self.transaction, timestamp: Self.time,
                    environment: .production),
                "query_two_bits"
            ),
            (
                try DeviceCheckRequest.validate(
                    deviceToken: Self.token, transactionID: Self.transaction, timestamp: Self.time,
                    environment: .production),
                "validate_device_token"
            ),
        ] {
            #expect(request.endpoint.description == "https://api.devicecheck.apple.com/v1/\(operation)")
            #expect(request.contentType == "application/json")
            let object = try Self.json(request)
            #expect(Set(object.keys) == ["device_token", "transaction_id", "timestamp"])
            #expect(object["device_token"] as? String == Self.token)
            #expect(object["transaction_id"] as? String == "5b737ca6-a4c7-488e-b928-8452960c4be9")
            #expect((object["timestamp"] as? NSNumber)?.int64Value == 1_487_716_472_250)
        }
    }

    @Test func updateAddsBothBits() throws {
        let request = try DeviceCheckRequest.update(
            deviceToken: Self.token, bit0: true, bit1: false, transactionID: Self.transaction, timestamp: Self.time,
            environment: .development)
        #expect(request.endpoint.description == "https://api.development.devicecheck.apple.com/v1/update_two_bits")
        let text = String(decoding: request.body, as: UTF8.self)
        #expect(text.hasSuffix(#","bit0":true,"bit1":false}"#))
        let object = try Self.json(request)
        #expect(object["bit0"] as? Bool == true)
        #expect(object["bit1"] as? Bool == false)
    }

    @Test func hostsPerEnvironmentAndOverride() throws {
        #expect(
            OutboundHTTPEndpoint.attestationData(environment: .production).description
                == "https://data.appattest.apple.com/v1/attestationData")
        #expect(
            OutboundHTTPEndpoint.attestationData(environment: .development).description
                == "https://data-development.appattest.apple.com/v1/attestationData")
        let local = try #require(OutboundOrigin(parsing: "https://127.0.0.1:8443"))
        for environment in AppleEnvironment.allCases {
            #expect(
                OutboundHTTPEndpoint.deviceCheck(.query, environment: environment, override: local).description
                    == "https://127.0.0.1:8443/v1/query_two_bits")
            #expect(
                OutboundHTTPEndpoint.attestationData(environment: environment, override: local).hostHeader
                    == "127.0.0.1:8443")
        }
        #expect(OutboundOrigin(parsing: "https://egress.internal/")?.port == 443)
        #expect(OutboundOrigin(parsing: "https://[::1]:9443")?.description == "https://[::1]:9443")
        for bad in [
            "http://127.0.0.1:8443", "https://", "https://h/path", "https://u@h", "https://h:0", "https://h:99999",
            "https://h:x", "https://h h",
        ] {
            #expect(OutboundOrigin(parsing: bad) == nil, "\(bad)")
        }
    }

    @Test func deviceTokensAreCheckedBeforeAnyRoundTrip() {
        for bad in ["", "abc\ndef", "abc def", "abc\"}", String(repeating: "A", count: 16 * 1024 + 1)] {
            #expect(throws: AppleError(.invalidRequest, "")) {
                try DeviceCheckRequest.query(deviceToken: bad, timestamp: Self.time, environment: .production)
            }
        }
    }

    @Test func fraudRiskBodyIsTheBase64Receipt() throws {
        let receipt: [UInt8] = Array(0..<200).map { UInt8($0) }
        let request = try FraudRiskRequest.make(receipt: receipt, environment: .development)
        #expect(request.endpoint.host == "data-development.appattest.apple.com")
        #expect(request.endpoint.path == "/v1/attestationData")
        #expect(request.authorizationPrefix == "")
        #expect(Data(base64Encoded: Data(request.body)).map { [UInt8]($0) } == receipt)
        #expect(throws: AppleError(.invalidRequest, "")) {
            try FraudRiskRequest.make(receipt: [], environment: .production)
        }
        #expect(throws: AppleError(.invalidRequest, "")) {
            try FraudRiskRequest.make(receipt: [UInt8](repeating: 1, count: 64 * 1024 + 1), environment: .production)
        }
    }

    @Test func serializedRequestIsExactHTTP1() throws {
        let request = try DeviceCheckRequest.validate(
            deviceToken: "QUJD", transactionID: Self.transaction, timestamp: Self.time, environment: .production)
        let bytes = request.serialized(token: "h.c.s")
        let body =
            #"{"device_token":"QUJD","transaction_id":"5b737ca6-a4c7-488e-b928-8452960c4be9","timestamp":1487716472250}"#
        let expected =
            "POST /v1/validate_device_token HTTP/1.1\r\n" + "Host: api.devicecheck.apple.com\r\n"
            + "Authorization: Bearer h.c.s\r\n" + "Content-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n" + "Connection: keep-alive\r\n" + "Accept: */*\r\n\r\n" + body
        #expect(String(decoding: bytes, as: UTF8.self) == expected)

        let local = OutboundOrigin(host: "localhost", port: 8443)
        let fraud = try FraudRiskRequest.make(receipt: [1, 2, 3], environment: .production, override: local)
        let text = String(decoding: fraud.serialized(token: "a.b.c"), as: UTF8.self)
        #expect(text.hasPrefix("POST /v1/attestationData HTTP/1.1\r\nHost: localhost:8443\r\nAuthorization: a.b.c\r\n"))
        #expect(text.hasSuffix("Content-Length: 4\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\nAQID"))
    }
}
