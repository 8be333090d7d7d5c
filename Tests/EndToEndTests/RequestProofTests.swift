import Foundation
import GatewayTesting
import Simulator
import Testing
import Verification

extension EndToEnd {
    /// Issue 12 through the built binary: launch validation (objects minted by
    /// `attest-gateway sim`), the counter window, gradual rollout and debug tokens.
    @Suite struct RequestProof {
        static let routes = """
              - name: store_only
                match: { path_prefix: /v1/store }
                upstream: api
                app_validation: { categories: [app_store], when_absent: deny }
              - name: min_version
                match: { path_prefix: /v1/min }
                upstream: api
                app_validation: { min_bundle_version: "5.2" }
              - name: windowed
                match: { path_prefix: /v1/parallel }
                upstream: api
                counter_window: 64
              - name: mac_only
                match: { path_prefix: /v1/mac }
                upstream: api
                app_validation: { macos_full_security: true }
              - name: ci
                match: { path_prefix: /ci/ }
                upstream: api
                allow_debug_tokens: true
              - name: api
                match: { path_prefix: /v1/ }
                upstream: api
            """

        /// A key minted and attested with `sim attest` (optionally with launch validation),
        /// and `sim assert` for each request.
        struct CLIDevice {
            let world: E2EWorld
            let directory: String
            let keyID: String

            static func attest(
                in world: E2EWorld, at gateway: GatewayInstance, category: UInt32? = nil, version: String? = nil,
                keyAccessPolicy: String? = nil
            ) throws -> (CLIDevice, HTTPResponse) {
                let directory = world.directory.file("sim")
                _ = try world.runGateway(["sim", "init", "--dir", directory])
                let challenge = try #require(
                    try gateway.request("POST", "/app-attest/challenge").json()["challenge"] as? String)
                var arguments = [
                    "sim", "attest", "--dir", directory, "--app-id", TestPolicy.appID, "--challenge", challenge,
                    "--environment", "production",
                ]
                if let category { arguments += ["--validation-category", String(category)] }
                if let version { arguments += ["--bundle-version", version] }
                if let keyAccessPolicy { arguments += ["--key-access-policy", keyAccessPolicy] }
                let minted = try SimulatorCLI.json(world.runGateway(arguments))
                let keyID = try #require(minted["key_id"] as? String)
                let attestation = try #require(minted["attestation"] as? String)
                let response = try gateway.request(
                    "POST", "/app-attest/attest",
                    body: #"{"key_id":"\#(keyID)","attestation":"\#(attestation)","challenge":"\#(challenge)"}"#)
                return (CLIDevice(world: world, directory: directory, keyID: keyID), response)
            }

            func send(
                _ target: String, to gateway: GatewayInstance, category: UInt32? = nil, version: String? = nil
            ) throws -> HTTPResponse {
                let clientData = Data(SimulatedApp.clientData(method: "GET", target: target, body: [], challenge: ""))
                var arguments = [
                    "sim", "assert", "--dir", self.directory, "--key-id", self.keyID, "--app-id", TestPolicy.appID,
                    "--client-data", clientData.base64EncodedString(),
                ]
                if let category { arguments += ["--validation-category", String(category)] }
                if let version { arguments += ["--bundle-version", version] }
                let signed = try SimulatorCLI.json(self.world.runGateway(arguments))
                let assertion = try #require(signed["assertion"] as? String)
                return try gateway.request(
                    "GET", target, headers: [("X-App-Attest-Key-Id", self.keyID), ("X-App-Assertion", assertion)])
            }
        }

        @Test(.timeLimit(.minutes(2)))
        func launchValidationPoliciesRefuseAndAllow() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", routes: Self.routes)

            // App Store build, version 5.3: admitted everywhere, identity forwarded.
            let (store, attested) = try CLIDevice.attest(in: world, at: gateway, category: 4, version: "5.3")
            #expect(attested.status == 201, "\(attested)")
            #expect(try attested.json()["validation_category"] as? String == "app_store")
            #expect(try attested.json()["bundle_version"] as? String == "5.3")
            let shown = try world.runGateway(["keys", "show", store.keyID, "--redis", world.redis.url])
            #expect(shown.stdout.contains(#""validation_category":4,"bundle_version":"5.3""#), "\(shown.stdout)")
            let admitted = try store.send("/v1/store/a", to: gateway, category: 4, version: "5.3")
            #expect(admitted.status == 200, "\(admitted)")
            let echo = try UpstreamEcho(admitted)
            #expect(echo.values("X-App-Attest-Validation-Category") == ["app_store"])
            #expect(echo.values("X-App-Attest-Bundle-Version") == ["5.3"])
            // The same key, re-signed as TestFlight: refused everywhere.
            expectDenied(
                try store.send("/v1/other", to: gateway, category: 2, version: "5.3"), 403,
                "validation_category_mismatch")
            // Below the minimum version.
            expectDenied(
                try store.send("/v1/min/a", to: gateway, category: 4, version: "5.1.9"), 403, "bundle_version_refused")
            #expect(try store.send("/v1/min/a", to: gateway, category: 4, version: "5.10").status == 200)

            // A TestFlight build: refused where only the App Store is allowed, admitted elsewhere.
            let (testflight, _) = try CLIDevice.attest(in: world, at: gateway, category: 2, version: "6.0")
            expectDenied(
                try testflight.send("/v1/store/a", to: gateway, category: 2, version: "6.0"), 403,
                "validation_category_refused")
            #expect(try testflight.send("/v1/other", to: gateway, category: 2, version: "6.0").status == 200)

            // An iOS 26 device (no entries): when_absent deny refuses it, allow lets it through.
            let (old, _) = try CLIDevice.attest(in: world, at: gateway)
            expectDenied(try old.send("/v1/store/a", to: gateway), 403, "validation_category_refused")
            let oldAllowed = try old.send("/v1/min/a", to: gateway)
            #expect(oldAllowed.status == 200)
            #expect(try UpstreamEcho(oldAllowed).values("X-App-Attest-Validation-Category").isEmpty)

            // Ops see the mix, bounded labels.
            let metrics = try gateway.metrics()
            // app_store: 5.3, 5.1.9, 5.10; testflight: the re-signed one and the TestFlight build's two.
            #expect(metrics["attest_gateway_launch_validation_total{category=\"app_store\"}", default: 0] == 3)
            #expect(metrics["attest_gateway_launch_validation_total{category=\"testflight\"}", default: 0] == 3)
            #expect(metrics["attest_gateway_launch_validation_total{category=\"none\"}", default: 0] == 2)
            #expect(metrics["attest_gateway_bundle_versions_total{version=\"5.3\"}", default: 0] == 2)
            #expect(metrics["attest_gateway_bundle_versions_total{version=\"6.0\"}", default: 0] == 2)
        }

        /// macOS 27 posture: `sim attest --key-access-policy` writes the extension; only a Full
        /// Security key passes the Mac-only route, and every key passes elsewhere.
        @Test(.timeLimit(.minutes(2)))
        func macOSPosturePolicyRefusesAndAllows() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", routes: Self.routes)

            let (mac, attested) = try CLIDevice.attest(in: world, at: gateway, keyAccessPolicy: "macos_full_security")
            #expect(try attested.json()["key_access_policy"] as? String == "macos_full_security")
            let admitted = try mac.send("/v1/mac/a", to: gateway)
            #expect(admitted.status == 200, "\(admitted)")
            #expect(try UpstreamEcho(admitted).values("X-App-Attest-Key-Access-Policy") == ["macos_full_security"])

            let (reduced, _) = try CLIDevice.attest(in: world, at: gateway, keyAccessPolicy: "reduced")
            expectDenied(try reduced.send("/v1/mac/a", to: gateway), 403, "macos_posture_refused")
            let (phone, _) = try CLIDevice.attest(in: world, at: gateway)
            expectDenied(try phone.send("/v1/mac/a", to: gateway), 403, "macos_posture_refused")
            #expect(try phone.send("/v1/other", to: gateway).status == 200)
        }

        @Test(.timeLimit(.minutes(1)))
        func verifyCommandsReportTheFields() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let directory = world.directory.file("sim")
            _ = try world.runGateway(["sim", "init", "--dir", directory])
            let minted = try SimulatorCLI.json(
                world.runGateway([
                    "sim", "attest", "--dir", directory, "--app-id", TestPolicy.appID, "--challenge", "c",
                    "--validation-category", "3", "--bundle-version", "27.1",
                ]))
            let verdict = try SimulatorCLI.json(
                world.runGateway([
                    "verify-attestation", "--attestation", try #require(minted["attestation"] as? String),
                    "--key-id", try #require(minted["key_id"] as? String), "--app-id", TestPolicy.appID,
                    "--challenge", "c", "--root-ca", world.trustRootPath,
                ]))
            #expect(verdict["valid"] as? Bool == true)
            #expect(verdict["validation_category"] as? Int == 3)
            #expect(verdict["bundle_version"] as? String == "27.1")

            let clientData = Data("hello".utf8).base64EncodedString()
            let signed = try SimulatorCLI.json(
                world.runGateway([
                    "sim", "assert", "--dir", directory, "--key-id", try #require(minted["key_id"] as? String),
                    "--app-id", TestPolicy.appID, "--client-data", clientData, "--validation-category", "3",
                ]))
            let checked = try SimulatorCLI.json(
                world.runGateway([
                    "verify-assertion", "--assertion", try #require(signed["assertion"] as? String), "--public-key",
                    try #require(minted["public_key"] as? String), "--app-id", TestPolicy.appID, "--client-data",
                    clientData, "--previous-counter", "0",
                ]))
            #expect(checked["validation_category"] as? Int == 3)
            #expect(checked["bundle_version"] == nil, "absent fields are left out")
        }

        /// 64 parallel requests with shuffled counters all pass with `counter_window: 64`, and
        /// every one replayed is refused.
        @Test(.timeLimit(.minutes(1)))
        func shuffledParallelAssertionsPassOnceWithAWindow() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", routes: Self.routes)
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)
            let signed = try (1...64).map { counter in
                (counter, try app.assertion(method: "GET", target: "/v1/parallel/\(counter)", counter: UInt32(counter)))
            }.shuffled()
            let requests = signed.map { counter, assertion in
                HTTPRequest(
                    port: gateway.ports.proxy, "GET", "/v1/parallel/\(counter)",
                    headers: app.headers(assertion: assertion))
            }
            let first = HTTPClient.sendAll(requests)
            #expect(
                first.allSatisfy { (try? $0.get().status) == 200 },
                "\(first.filter { (try? $0.get().status) != 200 }.prefix(3))")
            let replays = HTTPClient.sendAll(requests)
            for result in replays {
                guard case .success(let response) = result else {
                    Issue.record("\(result)")
                    continue
                }
                expectDenied(response, 401, "counter_replay")
            }
            // The strict route refuses what is behind the highest counter.
            let behind = try app.assertion(method: "GET", target: "/v1/strict", counter: 65)
            _ = try gateway.request("GET", "/v1/strict", headers: app.headers(assertion: behind))
            let late = try app.assertion(method: "GET", target: "/v1/strict", counter: 66)
            let later = try app.assertion(method: "GET", target: "/v1/strict", counter: 67)
            #expect(try gateway.request("GET", "/v1/strict", headers: app.headers(assertion: later)).status == 200)
            expectDenied(
                try gateway.request("GET", "/v1/strict", headers: app.headers(assertion: late)), 401, "counter_replay")
        }

        /// The 1,000-copy race on a windowed route: a counter inside the window, never seen,
        /// sent 1,000 times over two gateways, passes exactly once.
        @Test(.timeLimit(.minutes(1)))
        func thousandCopiesOfAnOutOfOrderCounterTwoGatewaysExactlyOnePasses() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateways = [
                try world.startGateway("gw-a", extra: E2EWorld.raceLimits, routes: Self.routes),
                try world.startGateway("gw-b", extra: E2EWorld.raceLimits, routes: Self.routes),
            ]
            let app = try world.app()
            #expect(try app.attest(with: gateways[0]).status == 201)
            // Both gateways hold the key in their caches (as in the warm 1,000-copy race); the
            // highest counter is then 21.
            for (index, gateway) in gateways.enumerated() {
                let ahead = try app.assertion(
                    method: "GET", target: "/v1/parallel/ahead", counter: UInt32(20 + index))
                let response = try gateway.request(
                    "GET", "/v1/parallel/ahead", headers: app.headers(assertion: ahead))
                #expect(response.status == 200)
            }
            let behind = try app.assertion(method: "GET", target: "/v1/parallel/behind", counter: 10)
            let requests = (0..<1000).map { index in
                HTTPRequest(
                    port: gateways[index % 2].ports.proxy, "GET", "/v1/parallel/behind",
                    headers: app.headers(assertion: behind))
            }
            var passed = 0
            var replays = 0
            for result in HTTPClient.sendAll(requests, timeout: .seconds(45)) {
                switch result {
                case .success(let response) where response.status == 200: passed += 1
                case .success(let response) where response.errorCode == "counter_replay": replays += 1
                default: Issue.record("\(result)")
                }
            }
            #expect(passed == 1)
            #expect(replays == 999)
        }

        /// `enforce_percent: 30`: two gateways put each key in the same arm, and so does a
        /// restarted gateway; the arm is in the upstream header and the access log.
        @Test(.timeLimit(.minutes(2)))
        func rolloutArmsAgreeAcrossGatewaysAndRestarts() throws {
            let routes = """
                  - name: rollout
                    match: { path_prefix: /v1/ }
                    upstream: api
                    enforce_percent: 30
                """
            let world = try E2EWorld()
            defer { world.shutDown() }
            let a = try world.startGateway("gw-a", routes: routes)
            let b = try world.startGateway("gw-b", routes: routes)
            let keys = (0..<2000).map { _ in Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
            }
            // The assertion is not base64: refused before any store call (enforce arm, 401) or
            // forwarded flagged (monitor arm, 200), so the outcome shows the arm alone.
            func outcomes(_ gateway: GatewayInstance) -> [Int] {
                let requests = keys.map {
                    HTTPRequest(
                        port: gateway.ports.proxy, "GET", "/v1/x",
                        headers: [("X-App-Attest-Key-Id", $0), ("X-App-Assertion", "!")])
                }
                return stride(from: 0, to: requests.count, by: 250).flatMap { start in
                    HTTPClient.sendAll(Array(requests[start..<min(start + 250, requests.count)]), timeout: .seconds(30))
                        .map { (try? $0.get().status) ?? -1 }
                }
            }
            let first = outcomes(a)
            #expect(!first.contains(-1))
            #expect(outcomes(b) == first, "two gateways agree on every key")
            let enforced = first.filter { $0 == 401 }.count
            #expect(first.filter { $0 == 200 }.count + enforced == keys.count)
            #expect(abs(Double(enforced) / Double(keys.count) * 100 - 30) <= 4, "\(enforced) of \(keys.count) enforced")

            let monitored = try a.request(
                "GET", "/v1/x",
                headers: [("X-App-Attest-Key-Id", keys[first.firstIndex(of: 200)!]), ("X-App-Assertion", "!")])
            #expect(try UpstreamEcho(monitored).values("X-App-Attest-Rollout-Arm") == ["monitor"])
            let arms = Set(a.accessLog.compactMap { $0["arm"] as? String })
            #expect(arms == ["enforce", "monitor"])
            let series = try a.metrics()
            #expect(
                series[
                    "attest_gateway_rollout_verdicts_total{route=\"rollout\",arm=\"enforce\",verdict=\"malformed\"}"]
                    == Double(enforced))

            a.kill()
            let restarted = try world.startGateway("gw-a2", routes: routes)
            #expect(outcomes(restarted) == first, "a restarted gateway agrees")
        }

        /// Debug tokens end to end: create (CLI), use (logged with its name), list (no secret),
        /// revoke, refusal.
        @Test(.timeLimit(.minutes(1)))
        func debugTokenFromCreateToRevoke() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", environment: "development", routes: Self.routes)

            let created = try SimulatorCLI.json(
                world.runGateway([
                    "debug-tokens", "create", "--name", "ci-sim", "--ttl", "30d", "--redis", world.redis.url,
                ]))
            let token = try #require(created["token"] as? String)
            #expect(created["name"] as? String == "ci-sim")
            #expect((created["expires_at"] as? String)?.hasSuffix("Z") == true)
            let again = try world.runGateway([
                "debug-tokens", "create", "--name", "ci-sim", "--ttl", "1d", "--redis", world.redis.url,
            ])
            #expect(again.status == 1, "names are unique")

            let admitted = try gateway.request("GET", "/ci/build", headers: [("X-App-Attest-Debug-Token", token)])
            #expect(admitted.status == 200, "\(admitted)")
            let echo = try UpstreamEcho(admitted)
            #expect(echo.values("X-App-Attest-Status") == ["debug"])
            #expect(echo.values("X-App-Attest-Debug-Token-Name") == ["ci-sim"])
            #expect(echo.values("X-App-Attest-Debug-Token").isEmpty)
            expectDenied(
                try gateway.request("GET", "/v1/x", headers: [("X-App-Attest-Debug-Token", token)]), 403,
                "debug_token_not_allowed")
            let used = eventually(timeout: .seconds(5)) { !gateway.logEvents("debug_token_used").isEmpty }
            #expect(used)
            let event = try #require(gateway.logEvents("debug_token_used").first)
            #expect(event["name"] as? String == "ci-sim")
            #expect(event["route"] as? String == "ci")
            #expect(
                !gateway.child.stderr.contains(token) && !gateway.child.stdout.contains(token),
                "the secret is never logged")

            let listed = try world.runGateway(["debug-tokens", "list", "--redis", world.redis.url])
            #expect(listed.status == 0)
            let line = try #require(
                try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any])
            #expect(line["name"] as? String == "ci-sim")
            #expect(line["last_used"] is String)
            #expect(line["expired"] as? Bool == false)
            #expect(!listed.stdout.contains(token))

            let revoked = try world.runGateway(["debug-tokens", "revoke", "ci-sim", "--redis", world.redis.url])
            #expect(revoked.status == 0, "\(revoked.stderr)")
            expectDenied(
                try gateway.request("GET", "/ci/build", headers: [("X-App-Attest-Debug-Token", token)]), 401,
                "debug_token_invalid")
            #expect(try world.runGateway(["debug-tokens", "revoke", "ci-sim", "--redis", world.redis.url]).status == 1)
        }

        @Test(.timeLimit(.minutes(1)))
        func debugTokensUnderProductionAreWarnedAtStartAndInAMetric() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", environment: "production", routes: Self.routes)
            let warned = eventually(timeout: .seconds(5)) { !gateway.logEvents("DEBUG_TOKENS_IN_PRODUCTION").isEmpty }
            #expect(warned)
            #expect(gateway.logEvents("DEBUG_TOKENS_IN_PRODUCTION").first?["routes"] as? String == "ci")
            #expect(try gateway.metrics()["attest_gateway_debug_tokens_production_routes"] == 1)
            let quiet = try world.startGateway("dev", environment: "development", routes: Self.routes)
            #expect(try quiet.metrics()["attest_gateway_debug_tokens_production_routes"] == 0)
        }
    }
}
