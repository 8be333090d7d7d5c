import Foundation
import GatewayTesting
import Testing

@testable import Enforcement
@testable import HTTP1
@testable import PolicyModel

/// docs/integrations.md is what operators copy into their proxies: its table of the gateway's
/// headers is the code's list, and each proxy configuration copies or clears every name on it.
/// A header added to `GatewayHeaderNamespace` without a line in each block fails here.
@Suite struct IntegrationDocTests {
    static func doc() throws -> String {
        try ProtocolDocTests.read("docs/integrations.md")
    }

    /// The fenced block that follows the first line containing `marker`.
    static func block(after marker: String, in doc: String) throws -> String {
        let start = try #require(doc.range(of: marker), "no \(marker) in docs/integrations.md")
        let fence = try #require(doc.range(of: "```", range: start.upperBound..<doc.endIndex))
        let bodyStart = try #require(doc.range(of: "\n", range: fence.upperBound..<doc.endIndex)).upperBound
        let end = try #require(doc.range(of: "```", range: bodyStart..<doc.endIndex))
        return String(doc[bodyStart..<end.lowerBound])
    }

    static func lowered(_ names: [String]) -> Set<String> { Set(names.map { $0.lowercased() }) }

    /// The client trust headers a proxy block must set or clear: every built-in name, and for
    /// each built-in prefix the names in common use (nginx cannot clear by prefix).
    static let trustHeadersForProxies: [String] =
        ClientTrustHeaders.builtInNames + ["X-SSL-Client-Cert", "X-SSL-Client-S-DN", "X-SSL-Client-Verify"]

    @Test func theHeaderTableIsTheCodesList() throws {
        let doc = try Self.doc()
        let start = try #require(doc.range(of: "<!-- gateway-headers:begin -->"))
        let end = try #require(doc.range(of: "<!-- gateway-headers:end -->"))
        var rows: [(String, String)] = []
        for line in doc[start.upperBound..<end.lowerBound].split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            rows.append((cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`")), cells[1]))
        }
        let expected = GatewayHeaderNamespace.entries.map { entry -> (String, String) in
            let role =
                switch entry.role {
                case .credential: "credential"
                case .credentialAndIdentity: "credential and identity"
                case .identity: "identity"
                case .answer: "answer"
                }
            return (entry.name, role)
        }
        #expect(rows.map(\.0) == expected.map(\.0))
        #expect(rows.map(\.1) == expected.map(\.1))
    }

    @Test func theNginxBlockOverwritesEveryCopiedHeaderAndTheClientTrustHeaders() throws {
        let block = try Self.block(after: "<!-- tested-config: nginx -->", in: Self.doc())
        var set: [String] = []
        for line in block.split(separator: "\n") {
            let words = line.split(separator: " ", omittingEmptySubsequences: true)
            if words.count >= 2, words[0] == "proxy_set_header" { set.append(String(words[1])) }
        }
        let missing = Self.lowered(GatewayHeaderNamespace.copiedByProxies).subtracting(Self.lowered(set))
        #expect(missing.isEmpty, "nginx block does not overwrite \(missing.sorted())")
        let trust = Self.lowered(Self.trustHeadersForProxies).subtracting(Self.lowered(set))
        #expect(trust.isEmpty, "nginx block does not clear \(trust.sorted())")
    }

    @Test func theCaddyBlockCopiesEveryHeaderAndDropsTheEmptyOnes() throws {
        let block = try Self.block(after: "<!-- tested-config: caddy -->", in: Self.doc())
        let copyLine = try #require(block.split(separator: "\n").first { $0.contains("copy_headers") })
        let copied = copyLine.split(separator: " ").dropFirst().map(String.init).filter { !$0.isEmpty }
        let wanted = Self.lowered(GatewayHeaderNamespace.copiedByProxies)
        #expect(wanted.subtracting(Self.lowered(copied.map { $0.trimmingCharacters(in: .whitespaces) })).isEmpty)
        for name in GatewayHeaderNamespace.copiedByProxies {
            #expect(block.contains("header \(name) \"\""), "Caddy block keeps an empty \(name)")
        }
        for name in Self.trustHeadersForProxies where name.lowercased() != "x-real-ip" {
            let deleted =
                block.contains("request_header -\(name)\n")
                || (name.lowercased().hasPrefix("x-ssl-client-") && block.contains("request_header -X-Ssl-Client-*"))
            #expect(deleted, "Caddy block does not delete \(name)")
        }
        #expect(block.contains("request_header X-Real-IP {remote_host}"))
    }

    @Test func theTraefikBlockCopiesEveryHeader() throws {
        let block = try Self.block(after: "## Traefik (`forwardAuth`)", in: Self.doc())
        var listed: [String] = []
        for line in block.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("- ") { listed.append(String(trimmed.dropFirst(2))) }
        }
        let missing = Self.lowered(GatewayHeaderNamespace.copiedByProxies).subtracting(Self.lowered(listed))
        #expect(missing.isEmpty, "Traefik block does not copy \(missing.sorted())")
    }

    /// Underscore spellings (`x_app_attest_status`) are one header to CGI and WSGI upstreams:
    /// Envoy's check does not see them (its `allowed_headers`), so its connection manager must
    /// drop or refuse them; nginx drops them unless a block turns `underscores_in_headers` on.
    @Test func theEnvoyBlockDropsUnderscoreNamesAndNginxKeepsItsDefault() throws {
        let doc = try Self.doc()
        let envoy = try Self.block(after: "## Envoy (`ext_authz`, HTTP service)", in: doc)
        let lines = envoy.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let options = try #require(
            lines.firstIndex(of: "common_http_protocol_options:"), "Envoy block has no common_http_protocol_options")
        let action = try #require(
            lines.dropFirst(options + 1).first { $0.hasPrefix("headers_with_underscores_action:") },
            "Envoy block does not set headers_with_underscores_action")
        let value = action.split(separator: " ").dropFirst().first.map(String.init) ?? ""
        #expect(["DROP_HEADER", "REJECT_REQUEST"].contains(value), "Envoy passes underscore names (\(value))")
        let nginx = try Self.block(after: "<!-- tested-config: nginx -->", in: doc)
        #expect(!nginx.contains("underscores_in_headers on"), "the nginx block passes underscore names")
    }

    @Test func theEnvoyBlockPassesTheMethodOverridesToTheCheck() throws {
        let block = try Self.block(after: "## Envoy (`ext_authz`, HTTP service)", in: Self.doc())
        var exact: [String] = []
        var prefixes: [String] = []
        for line in block.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            let value = trimmed.split(separator: " ").dropFirst(2).first.map(String.init) ?? ""
            if trimmed.hasPrefix("- exact:") { exact.append(value) }
            if trimmed.hasPrefix("- prefix:") { prefixes.append(value) }
        }
        for name in HTTPMethodOverrides.fieldNames + ["content-type"] {
            #expect(
                exact.contains(name) || prefixes.contains { name.hasPrefix($0) },
                "Envoy's allowed_headers hides \(name) from the check")
        }
        for name in GatewayHeaderNamespace.copiedByProxies {
            let lower = name.lowercased()
            #expect(exact.contains(lower) || prefixes.contains { lower.hasPrefix($0) }, "Envoy does not copy \(name)")
        }
    }
}
