import GatewayTesting
import Testing

@testable import Gateway
@testable import HTTP1

/// Issue 29: the headers other proxies set to tell an upstream who the client is. A client's
/// `X-Real-IP` is replaced by the client address; its `X-Forwarded-Client-Cert`,
/// `X-SSL-Client-*`, `X-Client-Cert`, `Client-Cert`, `Client-Cert-Chain` and whatever
/// `strip_client_headers` adds never reach the upstream; the gateway's own client subject header
/// is still sent under any of those names. Without sockets: the matcher, the proxy's head writer
/// (checked against the reference), trailers and the policy decoder.
@Suite struct ClientTrustHeadersTests {
    // MARK: - The matcher

    @Test func builtInNamesAndThePrefixMatchInAnyCase() {
        let trust = ClientTrustHeaders()
        for name in [
            "X-Real-IP", "x-real-ip", "X-REAL-IP", "X-Forwarded-Client-Cert", "x-forwarded-client-cert",
            "X-SSL-Client-S-DN", "x-ssl-client-s-dn", "X-Ssl-Client-Verify", "X-SSL-CLIENT-CERT", "X-SSL-Client-",
            "X-SSL-Client-Fingerprint-SHA256", "X-Client-Cert", "x-client-cert", "Client-Cert", "CLIENT-CERT",
            "Client-Cert-Chain", "client-cert-chain",
        ] {
            #expect(trust.contains(name), "\(name)")
            #expect(ClientTrustHeaders.isBuiltIn(name), "\(name)")
        }
        for name in [
            "", "X", "Host", "Accept", "X-Real-IPs", "X-Real-I", "X-Realip", "X-SSL-Client", "X-SSL-ClientS-DN",
            "X-SSL-Clien-", "Client-Certs", "Client-Cert-Chains", "X-Client-Cert-Subject", "X-Client-Certs",
            "X-Forwarded-For", "X-Forwarded-Client-Certs", "X-Forwarded-Client-Cer", "Content-Type", "User-Agent",
            "X-App-Attest-Status", "Client-Cer", "SSL-Client-S-DN",
        ] {
            #expect(!trust.contains(name), "\(name)")
        }
        #expect(ClientTrustHeaders.isRealIP("x-REAL-ip") && !ClientTrustHeaders.isRealIP("X-Real-IP2"))
    }

    /// The length switch against the plain reading of the list, over names built from the
    /// list's own pieces (near misses of every length and case).
    @Test func theFastMatchAgreesWithThePlainList() {
        let pieces = [
            "x", "X", "-", "real", "REAL", "ip", "ssl", "SSL", "client", "Client", "cert", "CERT", "chain", "s",
            "dn", "forwarded", "a", "e", "t",
        ]
        let names = ClientTrustHeaders.builtInNames.map { $0.lowercased() }
        let prefixes = ClientTrustHeaders.builtInPrefixes.map { $0.lowercased() }
        var random = SplitMix64(state: 29)
        for _ in 0..<20_000 {
            let count = Int.random(in: 1...7, using: &random)
            let name = (0..<count).map { _ in pieces.randomElement(using: &random)! }.joined()
            let lower = name.lowercased()
            let expected = names.contains(lower) || prefixes.contains { lower.hasPrefix($0) }
            #expect(ClientTrustHeaders.isBuiltIn(name) == expected, "\(name)")
        }
        for name in ClientTrustHeaders.builtInNames + ClientTrustHeaders.builtInPrefixes.map({ $0 + "X" }) {
            #expect(ClientTrustHeaders.isBuiltIn(name), "\(name)")
        }
    }

    @Test func operatorNamesAndPrefixesAreAdded() {
        let trust = ClientTrustHeaders(adding: ["X-Company-User", "X-Auth-*", "x-company-user"])
        for name in ["X-Company-User", "x-company-user", "X-AUTH-TOKEN", "x-auth-", "X-Auth-User-Id", "X-Real-IP"] {
            #expect(trust.contains(name), "\(name)")
        }
        for name in ["X-Company-Users", "X-Company-Use", "X-Auth", "X-Authorization", "Authorization", "Host"] {
            #expect(!trust.contains(name), "\(name)")
        }
        #expect(!ClientTrustHeaders().contains("X-Company-User"))
        #expect(trust.added == ["X-Company-User", "X-Auth-*", "x-company-user"])
    }

    @Test func entriesThatCannotBeAddedSayWhy() {
        for entry in [
            "X-Company-User", "X-Auth-*", "X-Real-IP", "Authorization", "X-Amzn-Mtls-Clientcert*",
            "X-Forwarded-Tls-Client-Cert*", "a",
        ] {
            #expect(ClientTrustHeaders.refusal(of: entry) == nil, "\(entry)")
        }
        let refused: [(String, String)] = [
            ("", "empty"), ("*", "at least one character"), ("X Bad", "header name"), ("X-Auth-*-Id", "header name"),
            ("X:Y", "header name"), ("X-Caf\u{E9}", "header name"), (String(repeating: "a", count: 129), "header name"),
            ("Host", "host"), ("x-forwarded-for", "x-forwarded-for"), ("X-*", "prefix covers"),
            ("X-Forwarded-*", "x-forwarded-for"), ("Trace*", "traceparent"), ("Content-Length", "content-length"),
            ("X-App-Attest-Status", "X-App-Attest-*"), ("X-App-*", "prefix covers"),
            ("x-app-attest-foo-*", "X-App-Attest-*"), ("X-App-Assertion", "x-app-assertion"),
            ("X-Request-Id", "x-request-id"),
        ]
        for (entry, reason) in refused {
            let refusal = ClientTrustHeaders.refusal(of: entry)
            #expect(refusal?.contains(reason) == true, "\(entry): \(String(describing: refusal))")
        }
        // An entry the decoder would refuse matches nothing when added anyway.
        #expect(!ClientTrustHeaders(adding: ["Host", "X-*"]).contains("Host"))
        #expect(!ClientTrustHeaders(adding: ["X-*"]).contains("X-App-Attest-Status"))
    }

    // MARK: - strip_client_headers

    @Test func stripClientHeadersLoadsAndIsSummarized() throws {
        let policy = try PolicyLoader.parse(
            "strip_client_headers: [X-Company-User, X-Auth-*]\n" + minimalPolicy(), sourcePath: "policies.yaml")
        #expect(policy.stripClientHeaders == ["X-Company-User", "X-Auth-*"])
        #expect(try PolicyLoader.parse(minimalPolicy(), sourcePath: "policies.yaml").stripClientHeaders.isEmpty)
        #expect(PolicySummary.render(policy).contains("strip_client_headers  X-Company-User, X-Auth-*  [besides"))
        let trust = ClientTrustHeaders(adding: policy.stripClientHeaders)
        #expect(trust.contains("x-auth-user") && trust.contains("X-COMPANY-USER"))
    }

    @Test func badEntriesAreRefusedWithFileLineAndField() {
        let cases: [(String, PolicyError.Code, String, String)] = [
            ("strip_client_headers: [X-Ok, \"X Bad\"]", .invalidValue, "strip_client_headers[1]", "header name"),
            ("strip_client_headers: [Host]", .invalidValue, "strip_client_headers[0]", "host"),
            ("strip_client_headers: [\"X-*\"]", .invalidValue, "strip_client_headers[0]", "prefix covers"),
            ("strip_client_headers: [X-App-Attest-Status]", .invalidValue, "strip_client_headers[0]", "X-App-Attest"),
            ("strip_client_headers: [\"*\"]", .invalidValue, "strip_client_headers[0]", "before the *"),
            ("strip_client_headers: X-Company-User", .wrongType, "strip_client_headers", "list"),
            ("strip_client_headers: [[X-A]]", .wrongType, "strip_client_headers[0]", "header name"),
        ]
        for (line, code, field, reason) in cases {
            guard let error = policyError(line + "\n" + minimalPolicy()) else { continue }
            #expect(error.code == code, "\(error)")
            #expect(error.file == "policies.yaml" && error.line == 1 && error.field == field, "\(error)")
            #expect(error.description.contains(reason), "\(error)")
        }
        let described = policyError("strip_client_headers: [X-Ok, \"X Bad\"]\n" + minimalPolicy())?.description
        #expect(described?.hasPrefix("policies.yaml:1:30: strip_client_headers[1]: expected a header name") == true)
        #expect(described?.hasSuffix("; found \"X Bad\"") == true, "\(String(describing: described))")
    }
}
