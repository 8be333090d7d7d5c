import Foundation
import GatewayTesting
import Testing
import Verification

@testable import AppleClient
@testable import Enforcement

/// The DeviceCheck fallback and the admin DeviceCheck API through the built binary (`serve`),
/// with scripts/fake-apple.py over TLS as Apple and scripts/upstream.py as the upstream.
@Suite(.serialized, .timeLimit(.minutes(2))) struct DeviceCheckFallbackServeTests {
    static let appID = "ABCDE12345.com.example.app"
    static let adminToken = "0123456789abcdef0123456789abcdef"
    static let challengeKey = [UInt8](repeating: 0x5a, count: 32)

    /// A running `serve` with its two ports.
    struct Served {
        let process: Process
        let log: NonBlockingLines
        let port: UInt16
        let adminPort: UInt16
    }

    static let defaultRoutes = """
          - { name: fallback, match: { path_prefix: /v1/fallback }, upstream: api, mode: enforce, fallback: devicecheck }
          - { name: strict, match: { path_prefix: / }, upstream: api, mode: enforce }
        """

    /// `extra` is appended to the policy (a `tokens:` block); `routes` replaces the two routes.
    static func serve(
        fake: FakeAppleServer, upstream: EnforcementServeTests.Upstream, routes: String = defaultRoutes,
        extra: String = ""
    ) throws -> Served {
        let directory = fake.keys.directory
        try (Self.adminToken + "\n").write(toFile: directory + "/admin-token", atomically: true, encoding: .utf8)
        let hex = Self.challengeKey.map { String(format: "%02x", $0) }.joined()
        try (hex + "\n").write(toFile: directory + "/challenge-keys", atomically: true, encoding: .utf8)
        let policy = URL(fileURLWithPath: directory + "/serve.yaml")
        try """
        environment: production
        store: memory
        listen: 127.0.0.1:\(try ProxyIntegrationTests.unusedPort())
        admin_listen: 127.0.0.1:\(try ProxyIntegrationTests.unusedPort())
        app_ids: [\(Self.appID)]
        challenge_key_file: challenge-keys
        upstreams: { api: { url: "http://127.0.0.1:\(upstream.port)" } }
        routes:
        \(routes)
        apple:
          team_id: \(FakeAppleServer.teamID)
          key_id: \(FakeAppleServer.keyID)
          private_key_file: \(fake.keys.p8)
          devicecheck_url: https://127.0.0.1:\(fake.port)
          ca_file: \(fake.caFile)
          device_check: { timeout: 2s, blocked_bit: bit1, token_ttl: 3s, admin_token_file: admin-token }
        \(extra)
        """.write(to: policy, atomically: true, encoding: .utf8)
        let (process, stderr) = ProxyIntegrationTests.serveProcess(
            binary: try ProxyIntegrationTests.gatewayBinary(), policy: policy)
        try process.run()
        let log = NonBlockingLines(stderr.fileHandleForReading.fileDescriptor)
        var ports: [String: UInt16] = [:]
        let started = log.wait { lines in
            for line in lines where line.contains("\"listening\"") {
                guard let range = line.range(of: "\"address\":\"127.0.0.1:") else { continue }
                let port = UInt16(line[range.upperBound...].prefix { $0.isNumber })
                let name = line.contains("\"listener\":\"admin\"") ? "admin" : "main"
                ports[name] = port
            }
            return ports.count == 2
        }
        guard started, let port = ports["main"], let adminPort = ports["admin"] else {
            BodyBudgetIntegrationTests.stop(process)
            throw TestFailure("serve did not start: \(log.lines.joined(separator: "\n"))")
        }
        return Served(process: process, log: log, port: port, adminPort: adminPort)
    }

    static func exchange(_ port: UInt16, deviceToken: String) throws -> (status: Int, json: [String: Any]) {
        let body = Array(#"{"device_token":"\#(deviceToken)"}"#.utf8)
        let answer = try EnforcementServeTests.exchange(
            port: port, "POST", "/app-attest/devicecheck", headers: [("Content-Type", "application/json")], body: body)
        return (answer.status, EnforcementServeTests.json(answer.body))
    }

    static func get(_ port: UInt16, _ target: String, _ headers: [(String, String)]) throws -> (
        status: Int, json: [String: Any], echoed: [String: String]
    ) {
        let answer = try EnforcementServeTests.exchange(port: port, "GET", target, headers: headers)
        let json = EnforcementServeTests.json(answer.body)
        var echoed: [String: String] = [:]
        for pair in (json["headers"] as? [[String]]) ?? [] where pair.count == 2 {
            echoed[pair[0].lowercased()] = pair[1]
        }
        return (answer.status, json, echoed)
    }

    @Test func theFallbackThroughExpiryTamperingAnotherAppIDAndABlockedBit() throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let upstream = try EnforcementServeTests.Upstream()
        defer { upstream.stop() }
        let served = try Self.serve(fake: fake, upstream: upstream)
        defer { BodyBudgetIntegrationTests.stop(served.process) }

        // The policy document tells the app which routes take the fallback.
        let document = try EnforcementServeTests.exchange(port: served.port, "GET", "/app-attest/policy")
        let routes = EnforcementServeTests.json(document.body)["routes"] as? [[String: Any]]
        #expect(routes?.map { $0["device_check_fallback"] as? Bool } == [true, false])

        // Exchange: Apple validates the DCDevice token; the gateway issues its own.
        let device = FakeAppleServerTests.token("phone-fallback")
        let issued = try Self.exchange(served.port, deviceToken: device)
        #expect(issued.status == 200, "\(issued.json)")
        #expect(issued.json["expires_in"] as? Int == 3)
        let token = try #require(issued.json["token"] as? String)

        // Use: forwarded with status devicecheck and the token's App ID; spoofed headers stripped.
        let used = try Self.get(
            served.port, "/v1/fallback/items",
            [("X-App-Attest-Token", token), ("X-App-Attest-Status", "verified"), ("X-App-Attest-Key-Id", "spoof")])
        // A key ID with the token is ambiguous: refused.
        #expect(used.status == 400)
        #expect(used.json["error"] as? String == "credentials_ambiguous")
        let forwarded = try Self.get(
            served.port, "/v1/fallback/items", [("X-App-Attest-Token", token), ("X-App-Attest-Status", "verified")])
        #expect(forwarded.status == 200)
        #expect(forwarded.echoed["x-app-attest-status"] == "devicecheck")
        #expect(forwarded.echoed["x-app-attest-app-id"] == Self.appID)
        #expect(forwarded.echoed["x-app-attest-environment"] == "production")
        #expect(forwarded.echoed["x-app-attest-token"] == nil, "the token is not passed upstream")

        // A route without the fallback refuses the token.
        let strict = try Self.get(served.port, "/v1/other", [("X-App-Attest-Token", token)])
        #expect(strict.status == 403)
        #expect(strict.json["error"] as? String == "devicecheck_not_allowed")

        // Every byte flipped in turn (one per base64url character here): never admitted.
        for index in [0, 3, 8, 20, token.utf8.count / 2, token.utf8.count - 1] {
            var characters = Array(token)
            characters[index] = characters[index] == "A" ? "B" : "A"
            let tampered = try Self.get(served.port, "/v1/fallback/x", [("X-App-Attest-Token", String(characters))])
            #expect(tampered.status == 401, "character \(index)")
            #expect(tampered.json["error"] as? String == "devicecheck_token_invalid", "character \(index)")
        }

        // A token for another App ID, signed with the fleet's key: refused.
        let other = DeviceCheckTokens(challengeKeys: [Self.challengeKey], ttlSeconds: 3).mint(
            appID: "ZZZZZ99999.com.other.app", environment: .production, deviceToken: device,
            now: Int64(Date().timeIntervalSince1970))
        let wrongApp = try Self.get(served.port, "/v1/fallback/x", [("X-App-Attest-Token", other)])
        #expect(wrongApp.status == 401)
        #expect(wrongApp.json["error"] as? String == "app_id_mismatch")

        // Expiry: after the 3 s TTL the same token is refused with its own code.
        Thread.sleep(forTimeInterval: 3.2)
        let expired = try Self.get(served.port, "/v1/fallback/x", [("X-App-Attest-Token", token)])
        #expect(expired.status == 401)
        #expect(expired.json["error"] as? String == "devicecheck_token_expired")

        // Apple refuses an invalid DeviceCheck token: no gateway token.
        let invalid = try Self.exchange(served.port, deviceToken: Data("invalid:0".utf8).base64EncodedString())
        #expect(invalid.status == 401)
        #expect(invalid.json["error"] as? String == "devicecheck_token_invalid")

        // The blocked bit (bit1) set at Apple: the exchange refuses the device.
        _ = try FakeAppleServerTests.deviceCheck(fake, .update, device, bits: (false, true)).get()
        let blocked = try Self.exchange(served.port, deviceToken: device)
        #expect(blocked.status == 403)
        #expect(blocked.json["error"] as? String == "devicecheck_blocked")

        // Apple unreachable: 503 devicecheck_unavailable, not a token.
        try fake.control("/_fake/mode", #"{"status": 503}"#)
        let down = try Self.exchange(served.port, deviceToken: FakeAppleServerTests.token("phone-down"))
        #expect(down.status == 503)
        #expect(down.json["error"] as? String == "devicecheck_unavailable")
        try fake.control("/_fake/mode", "{}")

        // Every decision is counted.
        let metrics = try EnforcementServeTests.exchange(port: served.adminPort, "GET", "/metrics")
        let text = String(decoding: metrics.body, as: UTF8.self)
        for series in [
            #"attest_gateway_devicecheck_total{stage="exchange",result="issued"} 1"#,
            #"attest_gateway_devicecheck_total{stage="exchange",result="devicecheck_blocked"} 1"#,
            #"attest_gateway_devicecheck_total{stage="token",result="accepted"} 1"#,
            #"attest_gateway_devicecheck_total{stage="token",result="devicecheck_token_expired"} 1"#,
            #"attest_gateway_devicecheck_total{stage="token",result="devicecheck_not_allowed"} 1"#,
            #"attest_gateway_verdicts_total{route="fallback",verdict="devicecheck"} 1"#,
        ] {
            #expect(text.contains(series), "\(series)")
        }
    }

    /// The first step to one token format: with `tokens:`, the exchange also answers an
    /// attestation token, which passes on `fallback: devicecheck` routes only.
    @Test func theExchangeAlsoIssuesAnAttestationTokenForFallbackRoutesOnly() throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let upstream = try EnforcementServeTests.Upstream()
        defer { upstream.stop() }
        let directory = fake.keys.directory
        try AppleTestKeys.openssl([
            "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", directory + "/t1.pem",
        ])
        try "a-subject-secret-of-at-least-32-bytes".write(
            toFile: directory + "/subject", atomically: true, encoding: .utf8)
        let routes = """
              - { name: fallback, match: { path_prefix: /v1/fallback }, upstream: api, mode: enforce, fallback: devicecheck, accept_token: { audience: orders } }
              - { name: strict, match: { path_prefix: / }, upstream: api, mode: enforce, accept_token: { audience: orders } }
            """
        let tokens = """
            tokens:
              issuer: https://attest.example.com
              active_kid: t1
              keys: [{ kid: t1, key_file: t1.pem }]
              subject_key_file: subject
              audiences: [{ name: orders }]
            """
        let served = try Self.serve(fake: fake, upstream: upstream, routes: routes, extra: tokens)
        defer { BodyBudgetIntegrationTests.stop(served.process) }

        let device = FakeAppleServerTests.token("phone-jwt")
        let body = Array(#"{"device_token":"\#(device)","audience":"orders"}"#.utf8)
        let answer = try EnforcementServeTests.exchange(
            port: served.port, "POST", "/app-attest/devicecheck", headers: [("Content-Type", "application/json")],
            body: body)
        let json = EnforcementServeTests.json(answer.body)
        #expect(answer.status == 200, "\(json)")
        #expect(json["token"] is String, "the DeviceCheck gateway token is still there")
        let jwt = try #require(json["attestation_token"] as? String)
        #expect(json["attestation_token_expires_in"] as? Int == 300)
        let claims = try CompactJWS(jwt).claims()
        #expect(claims.platform == "ios-devicecheck" && claims.appID == Self.appID && claims.audience == ["orders"])

        let fallback = try Self.get(served.port, "/v1/fallback/a", [("Authorization", "Bearer " + jwt)])
        #expect(fallback.status == 200, "\(fallback.json)")
        #expect(fallback.echoed["x-app-attest-status"] == "token")
        let strict = try Self.get(served.port, "/v1/other", [("Authorization", "Bearer " + jwt)])
        #expect(strict.status == 403 && strict.json["error"] as? String == "devicecheck_not_allowed")

        // An audience the policy does not list: refused before Apple is asked.
        let unknown = Array(#"{"device_token":"\#(device)","audience":"payments"}"#.utf8)
        let refused = try EnforcementServeTests.exchange(
            port: served.port, "POST", "/app-attest/devicecheck", headers: [("Content-Type", "application/json")],
            body: unknown)
        #expect(refused.status == 403)
        #expect(EnforcementServeTests.json(refused.body)["error"] as? String == "token_audience_unknown")
    }

    @Test func theAdminAPIQueriesAndUpdatesBehindItsBearerToken() throws {
        let fake = try FakeAppleServer()
        defer { fake.stop() }
        let upstream = try EnforcementServeTests.Upstream()
        defer { upstream.stop() }
        let served = try Self.serve(fake: fake, upstream: upstream)
        defer { BodyBudgetIntegrationTests.stop(served.process) }
        let device = FakeAppleServerTests.token("phone-admin")
        let json = [("Content-Type", "application/json")]
        let bearer = [("Authorization", "Bearer \(Self.adminToken)")] + json

        func admin(_ path: String, _ headers: [(String, String)], _ body: String) throws -> (Int, String) {
            let answer = try EnforcementServeTests.exchange(
                port: served.adminPort, "POST", path, headers: headers, body: Array(body.utf8))
            return (answer.status, String(decoding: answer.body, as: UTF8.self))
        }

        // No bearer, a wrong one: 401 and nothing reaches Apple.
        let query = #"{"device_token":"\#(device)"}"#
        #expect(try admin("/devicecheck/query", json, query).0 == 401)
        #expect(
            try admin("/devicecheck/query", [("Authorization", "Bearer \(Self.adminToken)x")] + json, query).0 == 401)
        let update = #"{"device_token":"\#(device)","bit0":true,"bit1":false}"#
        #expect(try admin("/devicecheck/update", [("Authorization", "Bearer nope")] + json, update).0 == 401)
        #expect(try FakeAppleServerTests.deviceCheck(fake, .query, device).get() == .bitsNeverSet)

        // The good bearer: query, update, and the fake's state reflects the update.
        #expect(try admin("/devicecheck/query", bearer, query) == (200, #"{"bits_set":false}"#))
        #expect(try admin("/devicecheck/update", bearer, update) == (200, #"{"updated":true}"#))
        guard case .bits(let bits) = try FakeAppleServerTests.deviceCheck(fake, .query, device).get() else {
            Issue.record("the fake holds no bits after the update")
            return
        }
        #expect(bits.bit0 && !bits.bit1)
        let (status, answer) = try admin("/devicecheck/query", bearer, query)
        #expect(status == 200 && answer.hasPrefix(#"{"bit0":true,"bit1":false,"last_update_time":""#))

        // Typed errors: a missing bit, Apple's 400 for a bad token.
        let (missingStatus, missing) = try admin("/devicecheck/update", bearer, query)
        #expect(missingStatus == 400 && missing.contains("malformed_request"))
        let bad = #"{"device_token":"\#(Data("invalid:1".utf8).base64EncodedString())"}"#
        let (badStatus, badAnswer) = try admin("/devicecheck/query", bearer, bad)
        #expect(badStatus == 400 && badAnswer.hasPrefix(#"{"error":"apple_bad_request","status":400"#))

        // Never on the public listener: there it is just an unrouted path for the strict route.
        let publicAnswer = try EnforcementServeTests.exchange(
            port: served.port, "POST", "/devicecheck/update", headers: bearer, body: Array(update.utf8))
        #expect(publicAnswer.status == 401)
        #expect(EnforcementServeTests.json(publicAnswer.body)["error"] as? String == "assertion_missing")
    }
}
