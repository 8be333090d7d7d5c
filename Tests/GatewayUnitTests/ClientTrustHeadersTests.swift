import GatewayTesting
import Testing

@testable import HTTP1
@testable import HTTPProxy
@testable import PolicyModel

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
        // Neither duplicates nor case count.
        #expect(trust == ClientTrustHeaders(adding: ["x-company-user", "X-AUTH-*"]))
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
        // docs/operations.md's example, word for word.
        let lines = String(repeating: "# a comment\n", count: 11)
        #expect(
            policyError(lines + "strip_client_headers: [X-Company-User, X-Forwarded-*]\n" + minimalPolicy())?
                .description
                == "policies.yaml:12:40: strip_client_headers[1]: the prefix covers x-forwarded-for, a header the "
                + "gateway writes or judges itself; found \"X-Forwarded-*\"")
    }

    // MARK: - The upstream head

    static let clientAddress = "203.0.113.9"

    /// The upstream head's fields as the proxy writes them (`writeHead`), after checking that
    /// the reference (`make`) writes the same bytes.
    static func upstreamFields(
        _ fields: [(String, String)],
        trusted: Bool = false,
        originAddress: String? = nil,
        trust: ClientTrustHeaders = ClientTrustHeaders(),
        subjectHeader: String = ListenerTLSConfiguration.defaultClientSubjectHeader,
        subject: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> [(String, String)] {
        let gateHead = HTTPRequestHead(
            method: "GET", target: "/v1/x", headers: HTTPHeaders(fields.map { (name: $0.0, value: $0.1) }))
        let subjectHeaders = ClientSubjectHeaders([ListenerTLSConfiguration.defaultClientSubjectHeader, subjectHeader])
        let correlation = RequestCorrelation.scan(gateHead.headers, peerIsTrusted: trusted) {
            RequestID(high: 1, low: 2)
        }
        let plan = UpstreamRequestPlan.make(
            gateHead: gateHead, framing: .none, bufferedBodyCount: nil, clientAddress: Self.clientAddress,
            upstreamHost: "up:8080", peerIsTrusted: trusted, originAddress: originAddress, trustHeaders: trust,
            subjectHeaders: subjectHeaders, subjectHeader: subjectHeader, subject: subject,
            requestID: correlation.requestID.text)
        var expected: [UInt8] = []
        HTTPSerializer.writeRequestHead(plan.head, into: &expected)

        var client = UpstreamRequestPlan.Client(address: Self.clientAddress)
        client.peerIsTrusted = trusted
        client.originAddress = originAddress
        client.trustHeaders = trust
        client.reservedSubjectHeaders = subjectHeaders
        client.subjectHeader = subjectHeader
        client.subject = subject
        let bound = UpstreamRequestPlan.headBound(
            gateHead: gateHead, client: &client, upstreamHost: "up:8080", requestID: correlation.requestID)
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: bound, alignment: 1)
        defer { memory.deallocate() }
        var writer = HeadWriter(memory)
        _ = UpstreamRequestPlan.writeHead(
            gateHead: gateHead, framing: .none, bufferedBodyCount: nil, client: &client, upstreamHost: "up:8080",
            correlation: correlation, into: &writer)
        let written = Array(UnsafeRawBufferPointer(rebasing: memory[0..<writer.count]))
        let text = String(decoding: written, as: UTF8.self)
        #expect(
            written == expected, "\(text)\nwant:\n\(String(decoding: expected, as: UTF8.self))",
            sourceLocation: sourceLocation)
        return text.split(separator: "\r\n").dropFirst().compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), String(line[line.index(colon, offsetBy: 2)...]))
        }
    }

    static func values(_ name: String, _ fields: [(String, String)]) -> [String] {
        fields.filter { $0.0.lowercased() == name.lowercased() }.map(\.1)
    }

    @Test func aClientsXRealIPIsReplacedByTheClientAddress() {
        let fields = Self.upstreamFields([
            ("Host", "api.example"), ("X-Real-IP", "6.6.6.6"), ("x-real-ip", "7.7.7.7"), ("X-REAL-IP", ""),
        ])
        #expect(Self.values("X-Real-IP", fields) == [Self.clientAddress], "\(fields)")
        // The same address X-Forwarded-For ends with.
        #expect(Self.values("X-Forwarded-For", fields) == [Self.clientAddress])
    }

    /// From a trusted peer, X-Real-IP is the client the gateway logs and limits (the right-most
    /// untrusted X-Forwarded-For hop), not what the peer sent, nor the peer itself.
    @Test func aTrustedPeersXRealIPGivesWayToTheDerivedClientAddress() {
        let fields = Self.upstreamFields(
            [("Host", "api.example"), ("X-Forwarded-For", "198.51.100.4"), ("X-Real-IP", "6.6.6.6")],
            trusted: true, originAddress: "198.51.100.4")
        #expect(Self.values("X-Real-IP", fields) == ["198.51.100.4"], "\(fields)")
        #expect(Self.values("X-Forwarded-For", fields) == ["198.51.100.4, \(Self.clientAddress)"])
        // Without a derived address (no X-Forwarded-For), the peer itself.
        let direct = Self.upstreamFields([("Host", "h"), ("X-Real-IP", "6.6.6.6")], trusted: true)
        #expect(Self.values("X-Real-IP", direct) == [Self.clientAddress])
        // An untrusted peer's origin is never read.
        let untrusted = Self.upstreamFields([("Host", "h")], originAddress: "198.51.100.4")
        #expect(Self.values("X-Real-IP", untrusted) == [Self.clientAddress])
    }

    @Test func clientCertificateHeadersAreRemovedInAnyCase() {
        let fields = Self.upstreamFields([
            ("Host", "api.example"), ("X-Forwarded-Client-Cert", "By=spiffe://evil;Hash=00;Subject=\"CN=admin\""),
            ("X-SSL-Client-S-DN", "CN=admin"), ("x-ssl-client-s-dn", "CN=admin"), ("X-SSL-CLIENT-VERIFY", "SUCCESS"),
            ("X-Ssl-Client-Cert", "-----BEGIN"), ("X-Client-Cert", "MIIB"), ("client-cert", ":MIIB:"),
            ("Client-Cert-Chain", ":MIIB:, :MIIC:"), ("Accept", "*/*"), ("X-Client-Certs", "kept"),
        ])
        let names = fields.map(\.0)
        #expect(
            names == [
                "Host", "Accept", "X-Client-Certs", "X-Forwarded-For", "X-Real-IP", "X-Forwarded-Proto",
                "X-Forwarded-Host", "Forwarded", "X-Request-Id",
            ], "\(fields)")
    }

    @Test func operatorAddedNamesAndPrefixesAreRemoved() {
        let trust = ClientTrustHeaders(adding: ["X-Company-User", "X-Auth-*"])
        let sent = [
            ("Host", "h"), ("X-Company-User", "admin"), ("x-company-user", "root"), ("X-Auth-Token", "t"),
            ("x-auth-groups", "admins"), ("X-Authorization", "kept"), ("X-Company-Users", "kept"),
        ]
        let fields = Self.upstreamFields(sent, trust: trust)
        #expect(
            fields.map(\.0).filter { !$0.hasPrefix("X-Forwarded") && $0 != "Forwarded" }
                == ["Host", "X-Authorization", "X-Company-Users", "X-Real-IP", "X-Request-Id"], "\(fields)")
        // Without the operator's list they go through.
        #expect(Self.values("X-Company-User", Self.upstreamFields(sent)) == ["admin", "root"])
    }

    /// `tls.client_subject_header: X-SSL-Client-S-DN` (a name upstreams behind nginx read): the
    /// client's copies go, the gateway's verified subject is the one sent.
    @Test func theGatewaysSubjectHeaderIsSentUnderAListedName() {
        let sent = [
            ("Host", "h"), ("X-SSL-Client-S-DN", "CN=spoofed"), ("x-ssl-client-s-dn", "CN=spoofed"),
            ("X-SSL-Client-Verify", "SUCCESS"),
        ]
        func ssl(_ fields: [(String, String)]) -> [String] {
            fields.filter { $0.0.lowercased().hasPrefix("x-ssl-client-") }.map { $0.0 + ": " + $0.1 }
        }
        let verified = Self.upstreamFields(sent, subjectHeader: "X-SSL-Client-S-DN", subject: "CN=app,O=Example")
        #expect(ssl(verified) == ["X-SSL-Client-S-DN: CN=app,O=Example"], "\(verified)")
        let none = Self.upstreamFields(sent, subjectHeader: "X-SSL-Client-S-DN")
        #expect(ssl(none).isEmpty, "\(none)")
        // The same when the operator also listed it.
        let listed = Self.upstreamFields(
            sent, trust: ClientTrustHeaders(adding: ["X-SSL-Client-S-DN"]), subjectHeader: "X-SSL-Client-S-DN",
            subject: "CN=app")
        #expect(Self.values("X-SSL-Client-S-DN", listed) == ["CN=app"])
    }

    @Test func trailersLoseTrustHeaders() {
        let trailers = HTTPHeaders([
            (name: "X-Real-IP", value: "6.6.6.6"), (name: "x-ssl-client-s-dn", value: "CN=admin"),
            (name: "Client-Cert", value: ":MIIB:"), (name: "X-Company-User", value: "admin"),
            (name: "X-Checksum", value: "abc"),
        ])
        let trust = ClientTrustHeaders(adding: ["X-Company-User"])
        #expect(HeaderRewriting.forwardedTrailers(trailers, trust: trust)?.map(\.name) == ["X-Checksum"])
    }
}
