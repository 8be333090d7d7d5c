import Foundation
import GatewayTesting
import Testing

@testable import GatewayIO
@testable import HTTP1
@testable import PolicyModel

/// Each kind of bad policy names the right code, line, column and field.
@Suite struct PolicyErrorTests {
    /// Asserts the error's position and field; returns it for message checks.
    @discardableResult
    private func expectError(
        _ text: String,
        _ code: PolicyError.Code,
        line: Int,
        column: Int? = nil,
        field: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> PolicyError? {
        guard let error = policyError(text, sourceLocation: sourceLocation) else { return nil }
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(error.line == line, "\(error)", sourceLocation: sourceLocation)
        if let column { #expect(error.column == column, "\(error)", sourceLocation: sourceLocation) }
        #expect(error.field == field, "\(error)", sourceLocation: sourceLocation)
        return error
    }

    @Test func badEnumValueHasTheDocumentedDescription() {
        let text = designExamplePolicy.replacingOccurrences(of: "mode: enforce", with: "mode: enfroce")
        let error = self.expectError(text, .invalidValue, line: 16, column: 11, field: "routes[0].mode")
        #expect(
            error?.description
                == "policies.yaml:16:11: routes[0].mode: expected one of enforce, monitor, off; found \"enfroce\""
        )
    }

    @Test func issue9KeysNameTheirLineAndField() {
        let proxies = "trusted_proxies: [10.0.0.0/8, 10.0.0/33]\n" + designExamplePolicy
        let error = self.expectError(proxies, .invalidValue, line: 1, field: "trusted_proxies[1]")
        #expect(error?.description.contains("CIDR") == true)
        self.expectError(
            "challenge_key_file: /nonexistent/keys\n" + designExamplePolicy, .invalidValue, line: 1,
            field: "challenge_key_file")
        let caseFlag = designExamplePolicy.replacingOccurrences(
            of: "mode: enforce", with: "mode: enforce\n    case_sensitive: yes please")
        self.expectError(caseFlag, .wrongType, line: 17, field: "routes[0].case_sensitive")
        let limits = "limits: { challenge_burst: 0 }\n" + designExamplePolicy
        self.expectError(limits, .outOfRange, line: 1, field: "limits.challenge_burst")
    }

    @Test func issue9KeysLoad() throws {
        let directory = try TemporaryDirectory()
        let keyFile = directory.path + "/challenge.keys"
        try (String(repeating: "ab", count: 32) + "\n").write(toFile: keyFile, atomically: true, encoding: .utf8)
        let text =
            "trusted_proxies: [10.0.0.0/8, \"fd00::/8\", 192.0.2.7]\nchallenge_key_file: \(keyFile)\n"
            + "limits: { max_connections_per_address: 64, max_buffered_body_bytes_per_address: 2MiB }\n"
            + designExamplePolicy.replacingOccurrences(
                of: "mode: enforce", with: "mode: enforce\n    case_sensitive: true\n    allow_encoded_slashes: true")
        var warnings: [PolicyWarning] = []
        let policy = try PolicyLoader.parse(text, sourcePath: "policies.yaml", warnings: &warnings)
        #expect(policy.trustedProxies == ["10.0.0.0/8", "fd00::/8", "192.0.2.7"])
        #expect(policy.challengeKeyFile == keyFile)
        #expect(policy.limits.maxConnectionsPerAddress == 64)
        #expect(policy.limits.maxBufferedBodyBytesPerAddress == 2 * 1_048_576)
        #expect(policy.routes[0].caseSensitive && policy.routes[0].allowEncodedSlashes)
        #expect(!policy.routes[1].caseSensitive && !policy.routes[1].allowEncodedSlashes)
    }

    @Test func syntaxErrorCarriesLibyamlsPosition() {
        let text = """
            store: memory
            routes:
              - match: { path_prefix: / 
                upstream: api
            """
        let error = self.expectError(text, .syntax, line: 4, field: "")
        #expect(error?.message.hasPrefix("YAML syntax error: ") == true)
        #expect(error?.description.hasPrefix("policies.yaml:4:") == true)

        let tab = "store: memory\n\tapp_ids: []\n"
        self.expectError(tab, .syntax, line: 2, column: 1, field: "")

        let badIndent = "store: memory\nlimits:\n  max_connections: 5\n max_header_count: 3\n"
        self.expectError(badIndent, .syntax, line: 4, field: "")
    }

    @Test func unknownKeySuggestsTheNearestValidKey() {
        let top = self.expectError(
            minimalPolicy("challenge_ttl: 30"),
            .unknownKey,
            line: 8,
            column: 1,
            field: "challenge_ttl"
        )
        #expect(top?.message == "unknown key \"challenge_ttl\"; did you mean \"challenge_ttl_seconds\"?")

        let route = self.expectError(
            minimalPolicy(routes: "  - match: { path_prefix: / }\n    upstrem: api"),
            .unknownKey,
            line: 7,
            column: 5,
            field: "routes[0].upstrem"
        )
        #expect(route?.message == "unknown key \"upstrem\"; did you mean \"upstream\"?")

        let match = self.expectError(
            minimalPolicy(routes: "  - match: { prefix: / }\n    upstream: api"),
            .unknownKey,
            line: 6,
            column: 14,
            field: "routes[0].match.prefix"
        )
        #expect(match?.message == "unknown key \"prefix\"; did you mean \"path_prefix\"?")

        let far = self.expectError(minimalPolicy("colour: blue"), .unknownKey, line: 8, field: "colour")
        #expect(far?.message.contains("expected one of listen, admin_listen, redis") == true)

        self.expectError(
            minimalPolicy("limits: { max_conections: 10 }"),
            .unknownKey,
            line: 8,
            field: "limits.max_conections"
        )
        self.expectError(
            "store: memory\nupstreams:\n  api: { url: \"http://h:1\", pool: 3 }\n",
            .unknownKey,
            line: 3,
            field: "upstreams.api.pool"
        )
    }

    @Test func wrongTypesAreNamed() {
        let listen = self.expectError(minimalPolicy("listen: 8080"), .wrongType, line: 8, column: 9, field: "listen")
        #expect(
            listen?.message
                == "expected host:port (e.g. 0.0.0.0:8080) or a listener {address: host:port, tls: ...}; found integer 8080"
        )

        let ttl = self.expectError(
            minimalPolicy("challenge_ttl_seconds: \"300\""),
            .wrongType,
            line: 8,
            field: "challenge_ttl_seconds"
        )
        #expect(ttl?.message == "expected an integer; found \"300\"")

        let ids = self.expectError(
            "store: memory\napp_ids: ABCDE12345.com.example.app\n",
            .wrongType,
            line: 2,
            column: 10,
            field: "app_ids"
        )
        #expect(ids?.message.hasSuffix("found \"ABCDE12345.com.example.app\"") == true)

        self.expectError(minimalPolicy("limits: [1, 2]"), .wrongType, line: 8, field: "limits")
        self.expectError(minimalPolicy("environment: true"), .wrongType, line: 8, field: "environment")
        self.expectError(minimalPolicy("admin_listen:"), .wrongType, line: 8, field: "admin_listen")
        self.expectError("- a\n- b\n", .wrongType, line: 1, field: "")
        self.expectError(
            minimalPolicy(routes: "  - match: { path_prefix: /, methods: GET }\n    upstream: api"),
            .wrongType,
            line: 6,
            field: "routes[0].match.methods"
        )
    }

    @Test func badEnumValues() {
        self.expectError(
            minimalPolicy("environment: staging"),
            .invalidValue,
            line: 8,
            column: 14,
            field: "environment"
        )
        self.expectError(
            minimalPolicy(routes: "  - match: { path_prefix: / }\n    upstream: api\n    binding: header"),
            .invalidValue,
            line: 8,
            column: 14,
            field: "routes[0].binding"
        )
        self.expectError(
            minimalPolicy(routes: "  - match: { path_prefix: / }\n    upstream: api\n    challenge: optional"),
            .invalidValue,
            line: 8,
            field: "routes[0].challenge"
        )
        self.expectError(
            minimalPolicy(routes: "  - match: { path_prefix: / }\n    upstream: api\n    on_store_error: retry"),
            .invalidValue,
            line: 8,
            field: "routes[0].on_store_error"
        )
        let store = self.expectError("store: redis\n", .invalidValue, line: 1, column: 8, field: "store")
        #expect(store?.message.contains("redis: redis://host:port/db") == true)
    }

    @Test func badURLs() {
        let redis = minimalPolicy().replacingOccurrences(of: "store: memory", with: "redis: http://127.0.0.1:6379")
        let error = self.expectError(redis, .invalidRedisURL, line: 1, column: 8, field: "redis")
        #expect(error?.message.hasSuffix("found \"http://127.0.0.1:6379\"") == true)

        // A password is never echoed, whatever is wrong with the URL.
        for url in [
            "redix://:hunter2@h:6379/0", "rediss://:hunter2@h:99999/0", "redis://:hunter2@h:99999/0",
            "redis://:hunter2@h/x",
        ] {
            let text = minimalPolicy().replacingOccurrences(of: "store: memory", with: "redis: \"\(url)\"")
            let error = self.expectError(text, .invalidRedisURL, line: 1, field: "redis")
            #expect(error?.description.contains("hunter2") == false, "\(String(describing: error))")
            #expect(error?.description.contains("hun") == false)
        }

        let port = minimalPolicy().replacingOccurrences(of: "store: memory", with: "redis: redis://127.0.0.1:99999/0")
        self.expectError(port, .invalidRedisURL, line: 1, field: "redis")

        for url in [
            "https://api:0", "https://api/v1", "ftp://api", "http://api:0", "http://api/v1", "http://bad host:80",
            "http://[::1",
            "http://300.1.1.1:80", "http://-api:80", "http://a..b",
        ] {
            let text = minimalPolicy().replacingOccurrences(of: "http://127.0.0.1:9000", with: url)
            self.expectError(text, .invalidUpstreamURL, line: 4, field: "upstreams.api.url")
        }
        let scheme = self.expectError(
            minimalPolicy().replacingOccurrences(of: "http://127.0.0.1:9000", with: "ftp://api"),
            .invalidUpstreamURL,
            line: 4,
            field: "upstreams.api.url"
        )
        #expect(scheme?.message.contains("expected http://host[:port] or https://host[:port]") == true)

        self.expectError(
            "store: memory\nupstreams:\n  api: { max_connections: 3 }\n",
            .missingKey,
            line: 3,
            field: "upstreams.api.url"
        )
    }

    @Test func routeNamingAMissingUpstream() {
        let error = self.expectError(
            minimalPolicy(routes: "  - match: { path_prefix: / }\n    upstream: apii"),
            .unknownUpstream,
            line: 7,
            column: 15,
            field: "routes[0].upstream"
        )
        #expect(error?.message == "expected one of the upstreams api; found \"apii\" (did you mean \"api\"?)")
        self.expectError(
            minimalPolicy(routes: "  - match: { path_prefix: / }"),
            .missingKey,
            line: 6,
            field: "routes[0].upstream"
        )
        self.expectError(minimalPolicy(routes: "  - upstream: api"), .missingKey, line: 6, field: "routes[0].match")
    }

    @Test func duplicateKeys() {
        let error = self.expectError(minimalPolicy("store: memory"), .duplicateKey, line: 8, column: 1, field: "store")
        #expect(error?.message == "duplicate key \"store\" (first given at line 1, column 1)")
        self.expectError(
            minimalPolicy(routes: "  - match: { path_prefix: /, path_prefix: /x }\n    upstream: api"),
            .duplicateKey,
            line: 6,
            field: "routes[0].match.path_prefix"
        )
    }

    @Test func badDurationsAndSizes() {
        for value in ["10 sec", "-5s", "0", "0s", "1.5s", "10d", "s", "ms"] {
            let text = minimalPolicy("limits:\n  header_read_timeout: \(value)")
            let error = policyError(text)
            #expect(error?.code == .invalidDuration, "\(value): \(String(describing: error))")
            #expect(error?.line == 9)
            #expect(error?.field == "limits.header_read_timeout")
        }
        self.expectError(
            minimalPolicy("limits: { shutdown_drain_timeout: 25h }"),
            .outOfRange,
            line: 8,
            field: "limits.shutdown_drain_timeout"
        )
        self.expectError(
            minimalPolicy("limits: { keep_alive_idle_timeout: [1] }"),
            .wrongType,
            line: 8,
            field: "limits.keep_alive_idle_timeout"
        )
        self.expectError(
            "store: memory\nupstreams:\n  api: { url: \"http://h:1\", connect_timeout: 5 minutes }\n",
            .invalidDuration,
            line: 3,
            field: "upstreams.api.connect_timeout"
        )
        self.expectError(
            minimalPolicy("limits: { max_header_bytes: 16KB }"),
            .invalidSize,
            line: 8,
            field: "limits.max_header_bytes"
        )
        self.expectError(
            minimalPolicy("limits: { max_header_bytes: 100 }"),
            .outOfRange,
            line: 8,
            field: "limits.max_header_bytes"
        )
        self.expectError(
            minimalPolicy(routes: "  - match: { path_prefix: / }\n    upstream: api\n    max_body_bytes: 2GiB"),
            .outOfRange,
            line: 8,
            field: "routes[0].max_body_bytes"
        )
        self.expectError(
            minimalPolicy("challenge_ttl_seconds: 0"),
            .outOfRange,
            line: 8,
            field: "challenge_ttl_seconds"
        )
        self.expectError(
            minimalPolicy("challenge_ttl_seconds: 99999999999999999999999"),
            .outOfRange,
            line: 8,
            field: "challenge_ttl_seconds"
        )
    }

    @Test func badListenAddresses() {
        let cases: [(String, String)] = [
            ("listen: \"8080\"", "missing :port"),
            ("listen: \":8080\"", "missing host"),
            ("listen: example.com:80", "host must be an IPv4 address"),
            ("listen: 127.0.0.1:0", "port must be 1-65535"),
            ("listen: 127.0.0.1:65536", "port must be 1-65535"),
            ("listen: \"::1:80\"", "IPv6 hosts need brackets"),
            ("listen: \"[::g]:80\"", "is not an IPv6 address"),
            ("listen: 300.1.1.1:80", "host must be an IPv4 address"),
        ]
        for (line, fragment) in cases {
            let error = self.expectError(
                minimalPolicy(line),
                .invalidListenAddress,
                line: 8,
                column: 9,
                field: "listen"
            )
            #expect(error?.message.contains(fragment) == true, "\(line): \(String(describing: error))")
        }
        self.expectError(
            minimalPolicy("listen: [127.0.0.1:80, bad]"),
            .invalidListenAddress,
            line: 8,
            column: 24,
            field: "listen[1]"
        )
        self.expectError(minimalPolicy("listen: []"), .invalidListenAddress, line: 8, field: "listen")
        self.expectError(
            minimalPolicy("listen: [\"0.0.0.0:80\", \"127.0.0.1:80\"]"),
            .addressConflict,
            line: 8,
            field: "listen[1]"
        )
        self.expectError(
            minimalPolicy("listen: 127.0.0.1:80\nadmin_listen: 127.0.0.1:80"),
            .addressConflict,
            line: 9,
            field: "admin_listen"
        )
    }

    @Test func appIDs() {
        self.expectError(
            minimalPolicy().replacingOccurrences(of: "[\"ABCDE12345.com.example.app\"]", with: "[]"),
            .emptyAppIDs,
            line: 2,
            column: 10,
            field: "app_ids"
        )
        for bad in [
            "abcde12345.com.example.app", "ABCDE1234.com.example", "ABCDE12345", "ABCDE12345.", "ABCDE12345.com..app",
            "ABCDE12345.com/app",
        ] {
            let text = minimalPolicy().replacingOccurrences(of: "ABCDE12345.com.example.app", with: bad)
            self.expectError(text, .invalidAppID, line: 2, column: 11, field: "app_ids[0]")
        }
        self.expectError(
            minimalPolicy().replacingOccurrences(
                of: "[\"ABCDE12345.com.example.app\"]",
                with: "[ABCDE12345.com.a, ABCDE12345.com.a]"
            ),
            .duplicateAppID,
            line: 2,
            field: "app_ids[1]"
        )
        // enforce (also by default) and monitor routes need app_ids.
        let noIDs = minimalPolicy().replacingOccurrences(of: "app_ids: [\"ABCDE12345.com.example.app\"]\n", with: "")
        let byDefault = self.expectError(noIDs, .appIDsRequired, line: 5, field: "routes[0].mode")
        #expect(byDefault?.message.contains("(the default)") == true)
        self.expectError(
            noIDs.replacingOccurrences(of: "upstream: api", with: "upstream: api\n    mode: monitor"),
            .appIDsRequired,
            line: 7,
            column: 11,
            field: "routes[0].mode"
        )
        #expect(throws: Never.self) {
            try PolicyLoader.parse(
                noIDs.replacingOccurrences(of: "upstream: api", with: "upstream: api\n    mode: off"),
                sourcePath: "p"
            )
        }
    }

    @Test func storeChoice() {
        let both = minimalPolicy("redis: redis://127.0.0.1:6379/0")
        let error = self.expectError(both, .conflictingKeys, line: 1, column: 1, field: "store")
        #expect(error?.message.contains("not both") == true)
        let neither = minimalPolicy().replacingOccurrences(of: "store: memory\n", with: "")
        self.expectError(neither, .missingKey, line: 1, field: "redis")
    }

    @Test func pathsAndMethods() {
        for bad in ["v1", "/v1//x", "/v1/../x", "/v1/%41", "/v1?x=1", "/a b", "/v1;x", "\"\""] {
            let text = minimalPolicy(routes: "  - match: { path_prefix: \(bad) }\n    upstream: api")
            self.expectError(text, .invalidPath, line: 6, field: "routes[0].match.path_prefix")
        }
        self.expectError(
            minimalPolicy(routes: "  - match: { path: /a, path_prefix: /b }\n    upstream: api"),
            .conflictingKeys,
            line: 6,
            field: "routes[0].match.path"
        )
        let lower = self.expectError(
            minimalPolicy(routes: "  - match: { methods: [GET, post] }\n    upstream: api"),
            .invalidMethod,
            line: 6,
            column: 29,
            field: "routes[0].match.methods[1]"
        )
        #expect(lower?.message.contains("did you mean \"POST\"?") == true)
        self.expectError(
            minimalPolicy(routes: "  - match: { methods: [] }\n    upstream: api"),
            .invalidMethod,
            line: 6,
            field: "routes[0].match.methods"
        )
        self.expectError(
            minimalPolicy(routes: "  - match: { methods: [GET, GET] }\n    upstream: api"),
            .invalidMethod,
            line: 6,
            field: "routes[0].match.methods[1]"
        )
        self.expectError(
            minimalPolicy("endpoints: { challenge: /x, attest: /x }"),
            .endpointCollision,
            line: 8,
            field: "endpoints.attest"
        )
        self.expectError(
            minimalPolicy("endpoints: { challenge: /app-attest/attest }"),
            .endpointCollision,
            line: 8,
            field: "endpoints.challenge"
        )
        self.expectError(
            minimalPolicy("endpoints: { attest: app-attest }"),
            .invalidPath,
            line: 8,
            field: "endpoints.attest"
        )
    }

    @Test func namesAreChecked() {
        self.expectError(
            minimalPolicy(
                routes: "  - { name: a, match: {}, upstream: api }\n  - { name: a, match: {}, upstream: api }"
            ),
            .duplicateRouteName,
            line: 7,
            field: "routes[1]"
        )
        self.expectError(
            minimalPolicy(routes: "  - { name: \"has space\", match: {}, upstream: api }"),
            .invalidName,
            line: 6,
            field: "routes[0].name"
        )
        self.expectError(
            "store: memory\nupstreams:\n  \"a b\": { url: \"http://h\" }\n",
            .invalidName,
            line: 3,
            field: "upstreams.a b"
        )
    }

    @Test func hostileYAMLIsRefused() {
        let anchor = self.expectError(
            minimalPolicy("limits: &l { max_connections: 5 }"),
            .anchorNotAllowed,
            line: 8,
            field: "limits"
        )
        #expect(anchor?.message.contains("&l") == true)
        self.expectError(
            "store: memory\napp_ids: [ABCDE12345.com.a]\nupstreams: { api: { url: \"http://h\" } }\nroutes:\n  - { match: {}, upstream: *x }\n",
            .aliasNotAllowed,
            line: 5,
            field: "routes[0].upstream"
        )
        let bomb = """
            a: &a ["x", "x"]
            b: [*a, *a]
            """
        self.expectError(bomb, .anchorNotAllowed, line: 1, field: "a")
        self.expectError("store: *s\n", .aliasNotAllowed, line: 1, column: 8, field: "store")
        self.expectError("store: !!binary bWVtb3J5\n", .tagNotAllowed, line: 1, field: "store")
        #expect(throws: Never.self) {
            try PolicyLoader.parse(
                minimalPolicy().replacingOccurrences(of: "store: memory", with: "store: !!str memory"),
                sourcePath: "p"
            )
        }

        let deep =
            String(repeating: "[", count: YAMLReader.maximumDepth + 1)
            + String(repeating: "]", count: YAMLReader.maximumDepth + 1)
        self.expectError(
            "store: memory\nx: \(deep)\n",
            .tooDeep,
            line: 2,
            field: "x" + String(repeating: "[0]", count: YAMLReader.maximumDepth - 1)
        )

        self.expectError(minimalPolicy() + "\n---\nstore: memory\n", .multipleDocuments, line: 9, field: "")
        self.expectError("", .emptyDocument, line: 0, field: "")
        self.expectError("# only a comment\n", .emptyDocument, line: 0, field: "")
        #expect(policyErrorCode { try PolicyLoader.parse("---\n...\n", sourcePath: "p") } == .emptyDocument)
        self.expectError("? [a]\n: b\n", .nonScalarKey, line: 1, field: "")

        let huge = String(repeating: "#", count: PolicyLoader.maximumFileBytes + 1)
        self.expectError(huge, .fileTooLarge, line: 0, field: "")
    }

    @Test func trustRootsMustBePEMCertificates() throws {
        let directory = try TemporaryDirectory()
        try "not a certificate\n".write(toFile: directory.path + "/junk.pem", atomically: true, encoding: .utf8)
        try "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".write(
            toFile: directory.path + "/short.pem",
            atomically: true,
            encoding: .utf8
        )
        try testCertificatePEM.write(toFile: directory.path + "/good.pem", atomically: true, encoding: .utf8)
        func parse(_ roots: String) throws(PolicyError) -> GatewayPolicy {
            try PolicyLoader.parse(
                minimalPolicy("trust_roots: \(roots)"),
                sourcePath: directory.path + "/policies.yaml"
            )
        }
        #expect(policyErrorCode { try parse("[junk.pem]") } == .trustRootNotCertificate)
        #expect(policyErrorCode { try parse("[short.pem]") } == .trustRootNotCertificate)
        #expect(policyErrorCode { try parse("[missing.pem]") } == .trustRootUnreadable)
        #expect(policyErrorCode { try parse("[\".\"]") } == .trustRootUnreadable)
        #expect(policyErrorCode { try parse("good.pem") } == .wrongType)
        #expect(try parse("[good.pem]").trustRoots == [directory.path + "/good.pem"])
        #expect(try parse("[\"\(directory.path)/./good.pem\"]").trustRoots == [directory.path + "/good.pem"])
        let error = #expect(throws: PolicyError.self) { try parse("[good.pem, junk.pem]") }
        #expect(error?.field == "trust_roots[1]")
        #expect(error?.line == 8)
        #expect(error?.column == 25)
    }
}
