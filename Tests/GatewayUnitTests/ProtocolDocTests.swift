import Foundation
import GatewayTesting
import Testing
import Verification

@testable import AppleClient
@testable import Enforcement
@testable import GateContract
@testable import GatewayIO
@testable import GatewayServe
@testable import GoogleClient
@testable import HTTP1
@testable import HTTPProxy
@testable import KeyStore
@testable import OutboundHTTP
@testable import PolicyModel
@testable import RedisClient

/// docs/protocol.md is what app developers implement against: its worked clientData examples
/// must be byte-exact, and every error code the gateway can answer must be explained there.
///
/// The examples are fenced blocks tagged `appattest-clientdata-example` holding `key: value` lines
/// (see `ClientDataExample`). Each is rebuilt with `ClientData.canonical` and compared line by line.
@Suite struct ProtocolDocTests {
    static let repositoryRoot = Repository.root

    static func read(_ relativePath: String) throws -> String { try Repository.read(relativePath) }

    @Test func workedExamplesMatchTheGatewaysClientData() throws {
        let examples = try ClientDataExample.parseAll(markdown: Self.read("docs/protocol.md"))
        #expect(examples.count >= 2, "docs/protocol.md should keep a challenge and a no-challenge example")
        #expect(examples.contains { !$0.challenge.isEmpty && !$0.body.isEmpty })
        #expect(examples.contains { $0.challenge.isEmpty && $0.body.isEmpty })
        for example in examples {
            let mismatches = example.mismatches()
            #expect(mismatches.isEmpty, "\(example.method) \(example.target): \(mismatches)")
        }
    }

    @Test func aWrongExampleIsCaught() throws {
        let markdown = try Self.read("docs/protocol.md")
        let good = try #require(try ClientDataExample.parseAll(markdown: markdown).first)
        var alteredDigest = good
        alteredDigest.bodySHA256Hex = String(good.bodySHA256Hex.reversed())
        #expect(alteredDigest.mismatches().contains("body_sha256_hex"))
        var alteredTarget = good
        alteredTarget.target += "&x=1"
        #expect(alteredTarget.mismatches().contains("client_data"))
        #expect(alteredTarget.mismatches().contains("client_data_hash_hex"))
        var alteredLength = good
        alteredLength.clientDataLength += 1
        #expect(alteredLength.mismatches() == ["client_data_length"])
    }

    @Test func parserRejectsIncompleteBlocks() {
        let markdown = """
            ```appattest-clientdata-example
            method: GET
            target: /
            ```
            """
        #expect(throws: ClientDataExample.ParseError.self) { try ClientDataExample.parseAll(markdown: markdown) }
        let unknownKey = """
            ```appattest-clientdata-example
            methd: GET
            ```
            """
        #expect(throws: ClientDataExample.ParseError.self) { try ClientDataExample.parseAll(markdown: unknownKey) }
    }

    @Test func escapesRoundTrip() throws {
        #expect(try ClientDataExample.unescape(#"a\nb\\n"#) == "a\nb\\n")
        #expect(throws: ClientDataExample.ParseError.self) { try ClientDataExample.unescape(#"bad\t"#) }
        #expect(throws: ClientDataExample.ParseError.self) { try ClientDataExample.unescape(#"dangling\"#) }
    }

    /// Every `Code("…")` the enforcement layer and the verifier can produce appears in
    /// docs/protocol.md as `` `code` ``, so an app developer can look up any error they get.
    @Test func everyErrorCodeIsDocumented() throws {
        let doc = try Self.read("docs/protocol.md")
        var codes = Set<String>()
        for source in [
            "Sources/Enforcement/EnforcementError.swift", "Sources/Verification/VerificationError.swift",
            "Sources/Verification/JWT/TokenError.swift",
        ] {
            codes.formUnion(Self.quotedCodes(in: try Self.read(source), after: "Code(\""))
        }
        #expect(codes.count >= 30, "the code scan found only \(codes.sorted())")
        // What the enforcement layer answers, through its own type (keeps the scan honest).
        for code in [EnforcementError.Code.counterReplay, .challengeMissing, .invalidSignature, .storeError] {
            #expect(codes.contains(code.rawValue))
        }
        let undocumented = codes.filter { !doc.contains("`\($0)`") }.sorted()
        #expect(undocumented.isEmpty, "docs/protocol.md does not explain: \(undocumented)")
    }

    /// The codes the proxy answers itself (408, 413, 502-504, 503 `body_budget_exhausted`, 404
    /// `no_route`) appear in docs/protocol.md too, in a table row starting with their status.
    @Test func everyProxyErrorCodeIsDocumentedWithItsStatus() throws {
        let doc = try Self.read("docs/protocol.md")
        let rows = doc.split(separator: "\n").filter { $0.hasPrefix("| ") }
        // The proxy's own answers come from one typed table (`ProxyError.Code`).
        var found: [String: Set<Int>] = [:]
        for code in ProxyError.Code.allCases {
            found[code.rawValue, default: []].insert(code.status)
        }
        let passthrough = try Self.read("Sources/GatewayTesting/PassthroughGate.swift")
        for code in Self.quotedCodes(in: passthrough, after: "code: \"") {
            // The status is the `status: NNN` closest before the code.
            guard let at = passthrough.range(of: "code: \"\(code)\""),
                let statusAt = passthrough[..<at.lowerBound].range(of: "status: ", options: .backwards),
                let status = Int(passthrough[statusAt.upperBound...].prefix(3))
            else { continue }
            found[code, default: []].insert(status)
        }
        #expect(found.count >= 8, "the code scan found only \(found.keys.sorted())")
        #expect(found["body_budget_exhausted"] == [503])
        #expect(found["no_route"] == [404])
        for (code, statuses) in found.sorted(by: { $0.key < $1.key }) {
            for status in statuses {
                let row = rows.first { $0.hasPrefix("| \(status) ") && $0.contains("`\(code)`") }
                #expect(row != nil, "docs/protocol.md has no \(status) row for \(code)")
            }
        }
    }

    /// Every HTTP parser error appears in the row of its status in the malformed-HTTP table
    /// (response-side errors, answered 502, in the upstream table).
    @Test func everyHTTPParserErrorIsDocumentedWithItsStatus() throws {
        let doc = try Self.read("docs/protocol.md")
        let rows = doc.split(separator: "\n").filter { $0.hasPrefix("| ") }
        for error in HTTPParserError.allCases {
            let row = rows.first { $0.contains("`\(error.code)`") }
            #expect(row != nil, "docs/protocol.md does not list \(error.code)")
            if let row {
                #expect(
                    row.hasPrefix("| \(error.status) "),
                    "\(error.code) is listed as \(row.prefix(12)), answered \(error.status)")
            }
        }
    }

    @Test func documentedVerdictsExist() throws {
        // X-App-Attest-Status values in the doc are the gateway's own.
        let doc = try Self.read("docs/protocol.md")
        for status in [IdentityHeaders.Status.verified, .skipped, .debug, .deviceCheck] {
            #expect(doc.contains("`\(status.headerValue)`"))
        }
        for header in [
            IdentityHeaders.keyID, IdentityHeaders.assertion, IdentityHeaders.challenge,
            IdentityHeaders.status, IdentityHeaders.appID, IdentityHeaders.environment,
            IdentityHeaders.counter, IdentityHeaders.validationCategory, IdentityHeaders.bundleVersion,
            IdentityHeaders.rolloutArm, IdentityHeaders.debugToken, IdentityHeaders.debugTokenName,
            IdentityHeaders.deviceCheckToken,
        ] {
            #expect(doc.contains("`\(header)`"), "docs/protocol.md does not name \(header)")
        }
    }

    /// The snake_case strings following `marker` in Swift source, e.g. `Code("nonce_mismatch"`.
    static func quotedCodes(in source: String, after marker: String) -> Set<String> {
        var found = Set<String>()
        var rest = source[...]
        while let start = rest.range(of: marker) {
            rest = rest[start.upperBound...]
            guard let end = rest.firstIndex(of: "\"") else { break }
            let code = rest[..<end]
            if !code.isEmpty, code.allSatisfy({ $0 == "_" || ("a"..."z").contains($0) || ("0"..."9").contains($0) }) {
                found.insert(String(code))
            }
            rest = rest[end...]
        }
        return found
    }
}

/// One worked example of docs/protocol.md.
struct ClientDataExample: Equatable {
    struct ParseError: Error, CustomStringConvertible {
        var description: String
    }

    var method: String
    var target: String
    var body: String
    var challenge: String
    var bodySHA256Hex: String
    var clientData: String
    var clientDataLength: Int
    var clientDataBase64: String
    var clientDataHashHex: String
    var clientDataHashBase64: String

    static let fence = "```appattest-clientdata-example"
    static let keys = [
        "method", "target", "body", "challenge", "body_sha256_hex", "client_data", "client_data_length",
        "client_data_base64", "client_data_hash_hex", "client_data_hash_base64",
    ]

    static func parseAll(markdown: String) throws(ParseError) -> [ClientDataExample] {
        var examples: [ClientDataExample] = []
        var fields: [String: String]?
        for (number, line) in markdown.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if fields == nil {
                if line == Self.fence { fields = [:] }
                continue
            }
            if line == "```" {
                examples.append(try Self(fields: fields ?? [:], line: number + 1))
                fields = nil
                continue
            }
            // `key: value`, or `key:` for an empty value. Values are taken verbatim.
            guard let colon = line.firstIndex(of: ":") else {
                throw ParseError(description: "line \(number + 1): expected `key: value`, found \(line)")
            }
            let key = String(line[..<colon])
            var value = line[line.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
            guard Self.keys.contains(key) else {
                throw ParseError(description: "line \(number + 1): unknown key \(key)")
            }
            guard fields?[key] == nil else { throw ParseError(description: "line \(number + 1): \(key) given twice") }
            fields?[key] = String(value)
        }
        if fields != nil { throw ParseError(description: "unterminated \(Self.fence) block") }
        return examples
    }

    init(fields: [String: String], line: Int) throws(ParseError) {
        func field(_ key: String) throws(ParseError) -> String {
            guard let value = fields[key] else {
                throw ParseError(description: "example ending on line \(line): missing \(key)")
            }
            return value
        }
        self.method = try field("method")
        self.target = try field("target")
        self.body = try field("body")
        self.challenge = try field("challenge")
        self.bodySHA256Hex = try field("body_sha256_hex")
        self.clientData = try Self.unescape(try field("client_data"))
        guard let length = Int(try field("client_data_length")) else {
            throw ParseError(description: "example ending on line \(line): client_data_length is not a number")
        }
        self.clientDataLength = length
        self.clientDataBase64 = try field("client_data_base64")
        self.clientDataHashHex = try field("client_data_hash_hex")
        self.clientDataHashBase64 = try field("client_data_hash_base64")
    }

    /// `\n` is a line feed and `\\` a backslash; any other escape is an error.
    static func unescape(_ text: String) throws(ParseError) -> String {
        var out = ""
        var escaping = false
        for character in text {
            if escaping {
                switch character {
                case "n": out.append("\n")
                case "\\": out.append("\\")
                default: throw ParseError(description: "unknown escape \\\(character) in client_data")
                }
                escaping = false
            } else if character == "\\" {
                escaping = true
            } else {
                out.append(character)
            }
        }
        if escaping { throw ParseError(description: "client_data ends with a lone backslash") }
        return out
    }

    /// The names of the lines that differ from what the gateway computes.
    func mismatches() -> [String] {
        let canonical = ClientData.canonical(
            method: self.method, target: self.target, body: Array(self.body.utf8), challenge: self.challenge)
        let hash = SHA256.hash(canonical)
        var wrong: [String] = []
        if SHA256.hash(Array(self.body.utf8)).hexString != self.bodySHA256Hex { wrong.append("body_sha256_hex") }
        if Array(self.clientData.utf8) != canonical { wrong.append("client_data") }
        if self.clientDataLength != canonical.count { wrong.append("client_data_length") }
        if Data(canonical).base64EncodedString() != self.clientDataBase64 { wrong.append("client_data_base64") }
        if hash.hexString != self.clientDataHashHex { wrong.append("client_data_hash_hex") }
        if Data(hash).base64EncodedString() != self.clientDataHashBase64 { wrong.append("client_data_hash_base64") }
        return wrong
    }
}

/// docs/operations.md documents every policies.yaml key the loader accepts, in the table of
/// its section, so that operators never meet an undocumented key (or a documented one that
/// the loader refuses).
@Suite struct OperationsDocTests {
    static func tableKeys(_ doc: String, section: String) -> Set<String> {
        guard let start = doc.range(of: "\n### \(section)\n") else { return [] }
        let rest = doc[start.upperBound...]
        let body = rest.range(of: "\n### ").map { rest[..<$0.lowerBound] } ?? rest
        var keys = Set<String>()
        for line in body.split(separator: "\n") where line.hasPrefix("| `") {
            let cell = line.dropFirst(3).prefix { $0 != "`" }
            keys.insert(String(cell))
        }
        return keys
    }

    @Test func everyPolicyKeyIsDocumented() throws {
        let doc = try ProtocolDocTests.read("docs/operations.md")
        let sections: [(String, [String], String)] = [
            ("Top level", PolicyDecoder.topLevelKeys, ""),
            ("`limits`", PolicyDecoder.limitKeys, ""),
            ("`upstreams.<name>`", PolicyDecoder.upstreamKeys, ""),
            ("`endpoints`", PolicyDecoder.endpointKeys, ""),
            ("`routes[i]`", PolicyDecoder.routeKeys.filter { $0 != "match" }, ""),
            ("`routes[i]`", PolicyDecoder.matchKeys, "match."),
            ("`apple`", PolicyDecoder.appleKeys, ""),
            ("`apple.device_check`", PolicyDecoder.appleDeviceCheckKeys, ""),
            ("`apple.fraud_risk`", PolicyDecoder.appleFraudRiskKeys, ""),
            ("`readiness`", PolicyDecoder.readinessKeys, ""),
            ("`access_log`", PolicyDecoder.accessLogKeys, ""),
            ("`tunnels`", PolicyDecoder.tunnelKeys, ""),
            ("`listen[i]`", ListenerDecoder.listenerKeys, ""),
            ("`listen[i]`", ListenerDecoder.tlsKeys, "tls."),
            ("`listen[i]`", ListenerDecoder.serverNameKeys, "tls.sni[i]."),
            ("`listen[i]`", ListenerDecoder.clientCertificateKeys, "tls.client_certificates."),
            ("`listen[i]`", ListenerDecoder.sessionTicketKeys, "tls.session_tickets."),
            ("`listen[i]`", PolicyDecoder.http2Keys, "http2."),
        ]
        for (section, accepted, prefix) in sections {
            let documented = Self.tableKeys(doc, section: section)
            #expect(!documented.isEmpty, "no table under ### \(section)")
            let expected = Set(accepted.map { prefix + $0 })
            let missing = expected.subtracting(documented).sorted()
            #expect(missing.isEmpty, "\(section): undocumented keys \(missing)")
            if prefix.isEmpty {
                // Dotted keys (`match.path`, `tls.certificate`) are checked by their own rows above.
                let unknown = documented.filter { !$0.contains(".") }.subtracting(expected).sorted()
                #expect(unknown.isEmpty, "\(section): documented keys the loader refuses \(unknown)")
            }
        }
    }

    @Test func documentedDefaultsMatchTheCode() throws {
        let doc = try ProtocolDocTests.read("docs/operations.md")
        // Spot checks of defaults that operators size against, read from the value types.
        let limits = GatewayLimits()
        #expect(limits.shutdownDrainTimeout == .seconds(20))
        #expect(doc.contains("| `shutdown_drain_timeout` | duration | `20s` |"))
        #expect(
            limits.maxConnections == 16_384 && doc.contains("| `max_connections` | integer 1–1,000,000 | `16384` |"))
        #expect(limits.maxHeaderBytes == 16 * 1024 && doc.contains("| `max_header_bytes` | size 1KiB–1MiB | `16KiB` |"))
        let route = RoutePolicy(name: "r", match: .init(pathPrefix: "/"), upstream: "u")
        #expect(route.maxBodyBytes == 1 << 20 && doc.contains("| `max_body_bytes` | size 0–1GiB | `1MiB` |"))
        #expect(route.onStoreError == .deny && doc.contains("| `on_store_error` | `deny` \\| `allow` | `deny` |"))
        let policy = try PolicyLoader.parse(
            """
            store: memory
            upstreams: { api: { url: "http://127.0.0.1:9000" } }
            routes: [ { match: { path_prefix: / }, upstream: api, mode: off } ]
            """, sourcePath: "defaults.yaml")
        #expect(
            policy.challengeTTLSeconds == 300 && doc.contains("| `challenge_ttl_seconds` | integer 1–86400 | `300` |"))
        #expect(
            policy.environment == .production
                && doc.contains("| `environment` | `production` \\| `development` \\| `any` | `production` |"))
        #expect(
            policy.upstreams["api"]?.maxConnections == 64
                && doc.contains("| `max_connections` | integer 1–10,000 | `64` |"))
        #expect(
            policy.listen.map(\.description) == ["0.0.0.0:8080"]
                && doc.contains("| `listen` | `host:port` or a list of them | `0.0.0.0:8080` |"))
    }
}

/// Every metric family the gateway registers appears in docs/operations.md's metrics table with
/// its labels, so dashboards and alerts are written against names that exist.
@Suite struct MetricsDocTests {
    @Test func everyRegisteredMetricIsDocumented() throws {
        let doc = try ProtocolDocTests.read("docs/operations.md")
        let registry = MetricsRegistry()
        ProxyMetrics(registry: registry).refusals.labels("-", "invalid_method").increment()
        let gate = GatewayGateMetrics(registry: registry, routeNames: ["r"])
        // Touch every labelled family once so that its label names show in the exposition.
        gate.requestDecided(route: "r", verdict: .verified)
        gate.attestation(result: "verified")
        gate.storeError(operation: "ping", kind: .timeout)
        gate.launchValidation(category: 4, bundleVersion: "5.2")
        gate.rolloutDecided(route: "r", arm: .monitor, verdict: .verified)
        let apple = OutboundClientMetrics(registry: registry, peer: .apple)
        apple.record(
            service: "fraud_risk", result: .failure(OutboundHTTPError(.timedOut, peer: .apple, "")), nanoseconds: 1)
        let google = OutboundClientMetrics(registry: registry, peer: .google)
        google.record(
            service: "android_revocation", result: .failure(OutboundHTTPError(.timedOut, peer: .google, "")),
            nanoseconds: 1)
        google.rejected(service: "android_revocation", outcome: "breaker_open")
        google.retried(service: "android_revocation")
        let revocationList = AndroidRevocationCurrent(maximumAge: .seconds(60), onStale: .refuse)
        revocationList.publish(.init(list: .empty, fetchedAt: Date(), source: "url"))
        let revocation = AndroidRevocationMetrics(registry: registry, current: { revocationList })
        revocation.fetch("url", "ok")
        revocation.staleEnrollments.labels("refused").increment()
        let refresh = FraudRiskRefreshMetrics(registry: registry)
        refresh.refreshed(outcome: "refreshed")
        refresh.riskMetric(3)
        EnforcementGateFactory.warnAboutDebugTokens(
            GatewayPolicy(listen: [], upstreams: [:], routes: []), registry: registry)
        AuthzMetrics(registry: registry).decided(dialect: .envoy, allowed: true)
        BuildInfoMetric.export(through: registry)
        ProcessMetrics.export(through: registry)
        _ = ConfigReloadMetrics(registry: registry)
        _ = TracingMetrics(registry: registry)
        _ = AdminGate(metricsText: { "" }, store: { nil }, isPolicyLoaded: { true }, registry: registry)
        AccessLog(fd: -1).exportDroppedLines(through: registry)
        // A TLS listener's certificate (the in-memory fixture's files).
        let certificates = ListenerCertificateMetrics()
        certificates.export(through: registry)
        let directory = try TemporaryDirectory()
        _ = try InMemoryTLSFixture.listenerTLS(in: directory)
        var tlsPolicy = GatewayPolicy(listen: [], upstreams: [:], routes: [])
        tlsPolicy.listeners = [
            ListenerConfiguration(
                address: ListenAddress(host: "0.0.0.0", port: 8443),
                tls: ListenerTLSConfiguration(
                    defaultCertificate: PEMCertificateKeyPair(
                        certificatePath: directory.path + "/localhost.pem",
                        privateKeyPath: directory.path + "/localhost.key")))
        ]
        certificates.update(for: tlsPolicy)
        // The store's families are rendered at scrape time, beside the registry's.
        let redis = RedisStore(
            url: try RedisURL(parsing: "redis://127.0.0.1:1"), loops: [try EventLoop(index: 0)])
        defer { redis.close() }
        let text = registry.render() + EnforcementGateFactory.storeMetricsText(redis)
        var families: [String: Set<String>] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let name = line.dropFirst("# TYPE ".count).prefix { $0 != " " }
            families[String(name)] = []
        }
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let brace = line.firstIndex(of: "{"), let close = line.firstIndex(of: "}") else { continue }
            var name = String(line[..<brace])
            for suffix in ["_bucket", "_sum", "_count"] where families[name] == nil && name.hasSuffix(suffix) {
                name = String(name.dropLast(suffix.count))
            }
            for pair in line[line.index(after: brace)..<close].split(separator: ",") {
                let label = String(pair.prefix { $0 != "=" })
                if label != "le" { families[name, default: []].insert(label) }
            }
        }
        #expect(families.count >= 11, "found only \(families.keys.sorted())")
        let rows = doc.split(separator: "\n").filter {
            $0.hasPrefix("| `attest_gateway_") || $0.hasPrefix("| `process_")
        }
        for (name, labels) in families.sorted(by: { $0.key < $1.key }) {
            let row = rows.first { $0.hasPrefix("| `\(name)` |") }
            #expect(row != nil, "docs/operations.md has no row for \(name)")
            for label in labels.sorted() {
                #expect(row?.contains("`\(label)`") == true, "\(name): label \(label) not documented")
            }
        }
        // ... and the table names no metric the gateway does not have.
        for row in rows {
            let name = String(row.dropFirst(3).prefix { $0 != "`" })
            #expect(families[name] != nil, "docs/operations.md documents \(name), which is not registered")
        }
    }
}
