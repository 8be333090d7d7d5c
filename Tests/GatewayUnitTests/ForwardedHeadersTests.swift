import GatewayTesting
import Testing

@testable import HTTP1
@testable import HTTPProxy

/// The `trusted_proxies` rule for forwarding headers: kept and appended from a trusted peer,
/// replaced from any other; `https` when TLS ended here.
@Suite struct ForwardedHeadersTests {
    static let spoofed = ForwardedHeaders.Incoming(
        forwardedFor: ["6.6.6.6", "7.7.7.7"],
        forwardedProto: ["https"],
        forwardedHost: ["admin.internal"],
        forwarded: ["for=6.6.6.6;proto=https"]
    )

    @Test func anUntrustedPeerGetsEveryFieldReplaced() {
        let plan = ForwardedHeaders.plan(
            peerIsTrusted: false, tlsEndedHere: false, incoming: Self.spoofed, clientAddress: "198.51.100.7",
            host: "api.example.com")
        #expect(
            plan
                == ForwardedHeaders(
                    forwardedFor: "198.51.100.7",
                    forwardedProto: "http",
                    forwardedHost: "api.example.com",
                    forwarded: "for=198.51.100.7;proto=http;host=api.example.com",
                    realIP: "198.51.100.7"))
    }

    @Test func tlsEndedHereSaysHTTPS() {
        let plan = ForwardedHeaders.plan(
            peerIsTrusted: false, tlsEndedHere: true, incoming: .init(), clientAddress: "2001:db8::7", host: nil)
        #expect(plan.forwardedProto == "https")
        #expect(plan.forwarded == "for=\"[2001:db8::7]\";proto=https")
        #expect(plan.forwardedFor == "2001:db8::7")
        #expect(plan.forwardedHost == nil)
    }

    @Test func aTrustedPeerIsKeptAndAppendedTo() {
        let plan = ForwardedHeaders.plan(
            peerIsTrusted: true, tlsEndedHere: false, incoming: Self.spoofed, clientAddress: "10.0.0.5",
            host: "api.example.com")
        #expect(plan.forwardedFor == "6.6.6.6, 7.7.7.7, 10.0.0.5")
        #expect(plan.forwardedProto == "https")  // the balancer terminated TLS: its scheme stands
        #expect(plan.forwardedHost == "admin.internal")
        #expect(plan.forwarded == "for=6.6.6.6;proto=https, for=10.0.0.5;proto=http;host=api.example.com")
    }

    @Test func aTrustedPeerWithoutFieldsGetsThisHopsValues() {
        // An L4 balancer (PROXY protocol) adds no HTTP fields: TLS ends here.
        let plan = ForwardedHeaders.plan(
            peerIsTrusted: true, tlsEndedHere: true, incoming: .init(forwardedFor: ["  ", ""]),
            clientAddress: "203.0.113.9", host: "api.example.com")
        #expect(
            plan
                == ForwardedHeaders(
                    forwardedFor: "203.0.113.9",
                    forwardedProto: "https",
                    forwardedHost: "api.example.com",
                    forwarded: "for=203.0.113.9;proto=https;host=api.example.com",
                    realIP: "203.0.113.9"))
    }

    @Test func fieldLinesJoinInOrderAndHostsAreQuotedWhenNotTokens() {
        let plan = ForwardedHeaders.plan(
            peerIsTrusted: true, tlsEndedHere: true,
            incoming: .init(
                forwardedFor: [" 1.1.1.1 ", "2.2.2.2, 3.3.3.3"], forwarded: ["for=1.1.1.1", "for=2.2.2.2"]),
            clientAddress: "10.0.0.5", host: "api.example.com:8443")
        #expect(plan.forwardedFor == "1.1.1.1, 2.2.2.2, 3.3.3.3, 10.0.0.5")
        #expect(plan.forwarded == "for=1.1.1.1, for=2.2.2.2, for=10.0.0.5;proto=https;host=\"api.example.com:8443\"")
    }

    @Test func aTrustedPeerMustNameOneSchemeAndOneHost() {
        func refusal(_ fields: [(String, String)]) -> String? {
            ForwardedHeaders.refusal(in: HTTPHeaders(fields.map { (name: $0.0, value: $0.1) }))
        }
        #expect(refusal([("Host", "a"), ("X-Forwarded-For", "1.1.1.1"), ("x-forwarded-for", "2.2.2.2")]) == nil)
        #expect(refusal([("X-Forwarded-Proto", " HTTPS "), ("X-Forwarded-Host", "api.example:8443")]) == nil)
        #expect(refusal([("Forwarded", "for=1.1.1.1"), ("Forwarded", "for=2.2.2.2")]) == nil)
        #expect(refusal([("X-Forwarded-Proto", "https"), ("x-forwarded-proto", "https")]) != nil)
        #expect(refusal([("X-Forwarded-Host", "a"), ("X-Forwarded-Host", "b")]) != nil)
        #expect(refusal([("X-Forwarded-Proto", "https, http")]) != nil)
        #expect(refusal([("X-Forwarded-Proto", "ftp")]) != nil)
        #expect(refusal([("X-Forwarded-Host", "a, b")]) != nil)
    }
}
