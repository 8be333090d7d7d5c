import Foundation
import GatewayIO
import Testing

@testable import AppleClient
@testable import GoogleClient
@testable import OutboundHTTP

/// The outbound client's requests to hosts other than Apple's (Google's status list and APIs):
/// method, credential, metrics label, and URLs.
@Suite struct OutboundRequestTests {
    @Test func getWithoutCredentialHasNoAuthorizationNorBodyHeaders() throws {
        let endpoint = try #require(OutboundHTTPEndpoint(url: "https://android.googleapis.com/attestation/status"))
        let request = OutboundHTTPRequest(
            method: "GET", endpoint: endpoint, credential: .none, service: "android_revocation")
        #expect(!request.needsClientToken)
        let text = String(decoding: request.serialized(token: nil), as: UTF8.self)
        #expect(
            text
                == "GET /attestation/status HTTP/1.1\r\nHost: android.googleapis.com\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n"
        )
        #expect(request.service == "android_revocation")
    }

    @Test func postWithBearerTokenCarriesItsOwnAuthorization() throws {
        let endpoint = try #require(
            OutboundHTTPEndpoint(url: "https://playintegrity.googleapis.com/v1/com.example.app:decodeIntegrityToken"))
        let request = OutboundHTTPRequest(
            method: "POST", endpoint: endpoint, credential: .bearer("ya29.token"), service: "play_integrity",
            body: Array(#"{"integrity_token":"x"}"#.utf8))
        // The client's token is ignored for a request with a credential of its own.
        let text = String(decoding: request.serialized(token: "a.b.c"), as: UTF8.self)
        #expect(text.hasPrefix("POST /v1/com.example.app:decodeIntegrityToken HTTP/1.1\r\n"))
        #expect(text.contains("\r\nAuthorization: Bearer ya29.token\r\n"))
        #expect(!text.contains("a.b.c"))
        #expect(text.contains("\r\nContent-Type: application/json\r\nContent-Length: 23\r\n"))
    }

    @Test func appleRequestsKeepTheirServiceLabels() throws {
        let fraud = try FraudRiskRequest.make(receipt: [1], environment: .production)
        #expect(fraud.needsClientToken)
        #expect(fraud.service == "fraud_risk")
        let query = try DeviceCheckRequest.query(
            deviceToken: "AAAA", timestamp: Date(timeIntervalSince1970: 0), environment: .production)
        #expect(query.needsClientToken)
        #expect(query.service == "devicecheck")
    }

    @Test func urlsParseHostPortAndPathOrAreRefused() throws {
        let local = try #require(OutboundHTTPEndpoint(url: "https://127.0.0.1:8443/attestation/status?x=1"))
        #expect(local.host == "127.0.0.1")
        #expect(local.port == 8443)
        #expect(local.path == "/attestation/status?x=1")
        #expect(local.hostHeader == "127.0.0.1:8443")
        let v6 = try #require(OutboundHTTPEndpoint(url: "https://[::1]:9/s"))
        #expect(v6.host == "::1")
        #expect(v6.description == "https://[::1]:9/s")
        for bad in [
            "http://example.com/s", "https://example.com", "https://user@example.com/s", "https://example.com/s#f",
            "https://example.com:0/s", "https://example.com:99999/s", "https://exa mple.com/s", "https://:443/s",
            "https://example.com/s\r\nX: y",
        ] {
            #expect(OutboundHTTPEndpoint(url: bad) == nil, "\(bad)")
        }
    }

    @Test func googleClientMetricsAreNamedApart() {
        let registry = MetricsRegistry()
        _ = OutboundClientMetrics(registry: registry, peer: .apple)
        let google = OutboundClientMetrics(registry: registry, peer: .google)
        google.requests.labels("android_revocation", "200").increment()
        let text = registry.render()
        #expect(text.contains(#"attest_gateway_google_requests_total{service="android_revocation",outcome="200"} 1"#))
        #expect(text.contains("# TYPE attest_gateway_apple_requests_total counter"))
        #expect(text.contains("# TYPE attest_gateway_google_breaker_state gauge"))
    }
}
