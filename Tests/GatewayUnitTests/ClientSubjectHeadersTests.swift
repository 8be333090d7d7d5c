import GatewayTesting
import HTTP1
import Testing

@testable import HTTPProxy
@testable import PolicyModel

/// Client-sent copies of the client certificate subject header never reach the upstream.
@Suite struct ClientSubjectHeadersTests {
    @Test func everyConfiguredNameAndTheDefaultAreStrippedCaseInsensitively() throws {
        var policy = GatewayPolicy(listen: [], upstreams: [:], routes: [])
        policy.listeners = [
            ListenerConfiguration(address: .init(host: "0.0.0.0", port: 8080)),
            ListenerConfiguration(
                address: .init(host: "0.0.0.0", port: 8443),
                tls: ListenerTLSConfiguration(
                    defaultCertificate: .init(certificatePath: "/c.pem", privateKeyPath: "/k.pem"),
                    clientSubjectHeader: "X-Verified-Subject")),
        ]
        let reserved = ClientSubjectHeaders(policy.clientSubjectHeaderNames)
        var headers = HTTPHeaders([
            (name: "x-client-cert-subject", value: "CN=spoofed"),
            (name: "Host", value: "api"),
            (name: "X-VERIFIED-SUBJECT", value: "CN=spoofed"),
        ])
        reserved.rewrite(&headers, subject: nil, header: "X-Verified-Subject")
        #expect(headers.map(\.name) == ["Host"])

        reserved.rewrite(&headers, subject: "CN=device 7,O=Example", header: "X-Verified-Subject")
        #expect(headers["x-verified-subject"] == "CN=device 7,O=Example")
        #expect(reserved.isReserved("X-Client-Cert-Subject") && !reserved.isReserved("X-Client-Cert"))
    }

    @Test func controlCharactersInASubjectCannotSplitTheHead() {
        #expect(ClientSubjectHeaders.fieldValue("CN=a\r\nX-Evil: 1\u{7F}\t") == "CN=a\\x0D\\x0AX-Evil: 1\\x7F\\x09")
        #expect(ClientSubjectHeaders.fieldValue("CN=Zoë") == "CN=Zoë")
    }

    /// Chunked trailers could carry a subject (or forwarding fields) to an upstream that merges
    /// trailers into headers: they are removed there too.
    @Test func trailersLoseSubjectAndForwardingFields() {
        let reserved = ClientSubjectHeaders(["X-Client-Cert-Subject", "X-Verified-Subject"])
        let trailers = HTTPHeaders([
            (name: "x-verified-subject", value: "CN=spoofed"), (name: "X-Client-Cert-Subject", value: "CN=spoofed"),
            (name: "X-Forwarded-For", value: "6.6.6.6"), (name: "Forwarded", value: "for=6.6.6.6"),
            (name: "X-Forwarded-Proto", value: "https"), (name: "X-Checksum", value: "abc"),
        ])
        #expect(HeaderRewriting.forwardedTrailers(trailers, reserved: reserved)?.map(\.name) == ["X-Checksum"])
    }
}
