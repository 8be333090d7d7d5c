import Foundation
import GatewayTesting
import Simulator
import Synchronization
import Testing
import Verification

@testable import Enforcement
@testable import GateContract
@testable import GatewayIO
@testable import HTTP1
@testable import KeyStore
@testable import PolicyModel

/// A gate built from policy YAML (so the decoder is exercised too), over one store, with the
/// simulator's CA trusted.
struct ProofHarness {
    static let appID = EnforcementHarness.appID
    let store: any AttestStore
    let metrics = RecordingGateMetrics()
    let gate: AttestGate

    init(
        routes: String, top: String = "", environment: String = "development",
        store: any AttestStore = MemoryStore(), now: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        let policy = try PolicyLoader.parse(
            """
            store: memory
            app_ids: ["\(Self.appID)"]
            environment: \(environment)
            upstreams: { api: { url: "http://127.0.0.1:9000" } }
            \(top)
            routes:
            \(routes)
            """, sourcePath: "proof.yaml")
        self.store = store
        self.gate = try AttestGate(
            policy: policy, store: store, trustRootsPEM: [EnforcementHarness.authority.rootCertificatePEM],
            metrics: self.metrics, now: now)
    }

    /// challenge → attest with these launch validation entries.
    func attest(
        _ device: SimulatedDevice, launch: LaunchValidation = LaunchValidation(), keyAccessPolicyBlob: [UInt8]? = nil
    ) async throws -> GateDecision {
        let (_, issued, _) = await runGate(self.gate, request("POST", "/app-attest/challenge"))
        let challenge = try #require(issued.json?["challenge"] as? String)
        var options = AttestationOptions()
        options.launchValidation = launch
        options.keyAccessPolicyBlob = keyAccessPolicyBlob
        let attestation = try EnforcementHarness.authority.attestation(
            for: device, appID: Self.appID, clientDataHash: SHA256.hash(Array(challenge.utf8)),
            environment: .development, options: options)
        let body = JSONText.object([
            ("key_id", JSONText.quote(Data(device.keyID).base64EncodedString())),
            ("attestation", JSONText.quote(Data(attestation).base64EncodedString())),
            ("challenge", JSONText.quote(challenge)),
        ])
        return await runGate(self.gate, request("POST", "/app-attest/attest"), body: Array(body.utf8)).1
    }

    /// A `binding: request` GET without challenge, asserted with these entries.
    func send(
        _ device: SimulatedDevice, counter: UInt32, target: String, launch: LaunchValidation = LaunchValidation()
    ) async throws -> GateDecision {
        let clientData = ClientData.canonical(method: "GET", target: target, body: [], challenge: "")
        var options = AssertionOptions()
        options.launchValidation = launch
        let assertion = try device.assertion(
            clientDataHash: SHA256.hash(clientData), appID: Self.appID, counter: counter, options: options)
        let head = request(
            "GET", target,
            headers: [
                ("X-App-Attest-Key-Id", Data(device.keyID).base64EncodedString()),
                ("X-App-Assertion", Data(assertion).base64EncodedString()),
            ])
        return await runGate(self.gate, head, body: []).1
    }
}

@Suite struct LaunchValidationPolicyTests {
    static let routes = """
          - name: store_only
            match: { path_prefix: /v1/store }
            upstream: api
            app_validation: { categories: [app_store], when_absent: deny }
          - name: min_version
            match: { path_prefix: /v1/min }
            upstream: api
            app_validation: { min_bundle_version: "5.10" }
          - name: listed
            match: { path_prefix: /v1/listed }
            upstream: api
            app_validation: { bundle_versions: ["5.2", "5.3"], when_absent: deny }
          - name: watch
            match: { path_prefix: /v1/watch }
            upstream: api
            mode: monitor
            app_validation: { categories: [app_store] }
          - name: any
            match: { path_prefix: /v1/ }
            upstream: api
        """

    @Test func attestedCategoryAndVersionAreStoredReportedAndForwarded() async throws {
        let h = try ProofHarness(routes: Self.routes)
        let device = try SimulatedDevice.generate()
        let attested = try await h.attest(device, launch: LaunchValidation(category: 4, bundleVersion: "5.12"))
        #expect(attested.status == 201)
        #expect(attested.json?["validation_category"] as? String == "app_store")
        #expect(attested.json?["bundle_version"] as? String == "5.12")
        let record = try #require(await h.store.fetchKey(keyID: Data(device.keyID).base64EncodedString()).value ?? nil)
        #expect(record.validationCategory == 4 && record.bundleVersion == "5.12")

        let forwarded = try #require(
            try await h.send(
                device, counter: 1, target: "/v1/store/x", launch: LaunchValidation(category: 4, bundleVersion: "5.13")
            )
            .forwardedHead)
        #expect(forwarded.headers["X-App-Attest-Validation-Category"] == "app_store")
        #expect(forwarded.headers["X-App-Attest-Bundle-Version"] == "5.13", "the running build's version")
        #expect(h.metrics.snapshot.launchValidation["4|5.13"] == 1)
    }

    @Test func categoryOutsideTheListIsRefusedAndInsideAllowed() async throws {
        let h = try ProofHarness(routes: Self.routes)
        let testflight = try SimulatedDevice.generate()
        #expect(try await h.attest(testflight, launch: LaunchValidation(category: 2)).status == 201)
        let refused = try await h.send(
            testflight, counter: 1, target: "/v1/store/x", launch: LaunchValidation(category: 2))
        #expect(refused.status == 403)
        #expect(refused.errorCode == "validation_category_refused")
        #expect(
            (refused.json?["message"] as? String)?.contains("testflight is not one of the allowed app_store") == true)
        // The same device is fine where no category rule applies.
        #expect(
            try await h.send(testflight, counter: 2, target: "/v1/other", launch: LaunchValidation(category: 2))
                .forwardedHead?.headers["X-App-Attest-Validation-Category"] == "testflight")
        #expect(h.metrics.snapshot.requests["store_only|launch_validation_refused"] == 1)
    }

    @Test func whenAbsentDecidesForDevicesThatWriteNone() async throws {
        let h = try ProofHarness(routes: Self.routes)
        let old = try SimulatedDevice.generate()  // iOS 26: no extensions at all
        #expect(try await h.attest(old).status == 201)
        let denied = try await h.send(old, counter: 1, target: "/v1/store/x")
        #expect(denied.errorCode == "validation_category_refused")
        #expect((denied.json?["message"] as? String)?.contains("when_absent is deny") == true)
        let allowed = try #require(try await h.send(old, counter: 2, target: "/v1/min/x").forwardedHead)
        #expect(allowed.headers["X-App-Attest-Validation-Category"] == nil)
        #expect(allowed.headers["X-App-Attest-Bundle-Version"] == nil)
        #expect(try await h.send(old, counter: 3, target: "/v1/listed/x").errorCode == "bundle_version_refused")
    }

    @Test func bundleVersionsAreComparedNumericallyAndByList() async throws {
        let h = try ProofHarness(routes: Self.routes)
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device, launch: LaunchValidation(category: 4, bundleVersion: "5.2")).status == 201)
        var counter: UInt32 = 0
        func send(_ target: String, _ version: String) async throws -> GateDecision {
            counter += 1
            return try await h.send(
                device, counter: counter, target: target, launch: LaunchValidation(category: 4, bundleVersion: version))
        }
        #expect(try await send("/v1/min/a", "5.9").errorCode == "bundle_version_refused", "5.9 < 5.10")
        #expect(try await send("/v1/min/a", "5.10").forwardedHead != nil)
        #expect(try await send("/v1/min/a", "6").forwardedHead != nil)
        #expect(try await send("/v1/min/a", "5.10-beta").errorCode == "bundle_version_refused", "not numeric")
        #expect(try await send("/v1/listed/a", "5.3").forwardedHead != nil)
        #expect(try await send("/v1/listed/a", "5.4").errorCode == "bundle_version_refused")
    }

    @Test func assertionCategoryDifferentFromTheAttestationIsARe_signedBinary() async throws {
        let h = try ProofHarness(routes: Self.routes)
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device, launch: LaunchValidation(category: 4, bundleVersion: "5.2")).status == 201)
        let resigned = try await h.send(device, counter: 1, target: "/v1/other", launch: LaunchValidation(category: 5))
        #expect(resigned.status == 403)
        #expect(resigned.errorCode == "validation_category_mismatch")
        let silent = try await h.send(device, counter: 2, target: "/v1/other")
        #expect(silent.errorCode == "validation_category_mismatch", "an iOS 27 key that stops writing it")
        #expect(
            try await h.send(device, counter: 3, target: "/v1/other", launch: LaunchValidation(category: 4))
                .forwardedHead != nil)
    }

    @Test func monitorRouteForwardsTheRefusalMarked() async throws {
        let h = try ProofHarness(routes: Self.routes)
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device, launch: LaunchValidation(category: 2)).status == 201)
        let forwarded = try #require(
            try await h.send(device, counter: 1, target: "/v1/watch/x", launch: LaunchValidation(category: 2))
                .forwardedHead)
        #expect(forwarded.headers["X-App-Attest-Status"] == "failed; reason=validation_category_refused")
    }

    /// The values are XNU's `CS_VALIDATION_CATEGORY_*` (Apple's `es_cs_validation_category_t`); an
    /// earlier table guessed 1 for the App Store, which would have refused every App Store build
    /// under `categories: [app_store]` and admitted platform binaries instead.
    @Test func categoryValuesAreTheKernelsCodeSigningCategories() {
        let expected: [UInt32: String] = [
            0: "invalid", 1: "platform", 2: "testflight", 3: "development", 4: "app_store", 5: "enterprise",
            6: "developer_id", 7: "local_signing", 8: "rosetta", 9: "oopjit", 10: "unvalidated",
        ]
        for (value, name) in expected {
            #expect(LaunchValidationCategory.name(of: value) == name, "value \(value)")
        }
        #expect(LaunchValidationCategory.names.count == expected.count)
        #expect(LaunchValidationCategory.value(named: "ad_hoc") == nil, "ad hoc is not a kernel category")
    }

    @Test func categoryNamesRoundTrip() {
        for entry in LaunchValidationCategory.names {
            #expect(LaunchValidationCategory.value(named: entry.name) == entry.value)
            #expect(LaunchValidationCategory.name(of: entry.value) == entry.name)
        }
        #expect(LaunchValidationCategory.name(of: 77) == "category_77")
        #expect(LaunchValidationCategory.value(named: "category_77") == 77)
        for bad in ["category_", "category_07", "category_x", "category_99999999999", "App_Store", ""] {
            #expect(LaunchValidationCategory.value(named: bad) == nil, "\(bad)")
        }
    }

    @Test func metricLabelsAreBounded() {
        let registry = MetricsRegistry()
        let metrics = GatewayGateMetrics(registry: registry, routeNames: ["r"])
        for minor in 0..<25 { metrics.launchValidation(category: 4, bundleVersion: "5.\(minor)") }
        metrics.launchValidation(category: 99, bundleVersion: "5.0")
        metrics.launchValidation(category: nil, bundleVersion: nil)
        let text = registry.render()
        let versions = text.split(separator: "\n").filter { $0.hasPrefix("attest_gateway_bundle_versions_total{") }
        #expect(versions.count == GatewayGateMetrics.bundleVersionLabelLimit + 2, "20 by name, other, none")
        #expect(text.contains(#"attest_gateway_bundle_versions_total{version="other"} 5"#))
        #expect(text.contains(#"attest_gateway_bundle_versions_total{version="5.0"} 2"#))
        #expect(text.contains(#"attest_gateway_launch_validation_total{category="app_store"} 25"#))
        #expect(text.contains(#"attest_gateway_launch_validation_total{category="other"} 1"#))
        #expect(text.contains(#"attest_gateway_launch_validation_total{category="none"} 1"#))
    }

    @Test func bundleVersionOrder() throws {
        func v(_ text: String) throws -> BundleVersion { try #require(BundleVersion(text)) }
        #expect(try v("5.2") < v("5.10"))
        #expect(try v("5.2") == v("5.2.0"))
        #expect(try v("5.2.1") > v("5.2"))
        #expect(try v("10") > v("9.99.99"))
        for bad in ["", "5.", ".5", "5..2", "5.2a", "v5", "1.2.3.4.5.6.7.8.9", "1234567890123456789"] {
            #expect(BundleVersion(bad) == nil, "\(bad)")
        }
    }
}

@Suite struct CounterWindowGateTests {
    static let routes = """
          - name: parallel
            match: { path_prefix: /p/ }
            upstream: api
            counter_window: 4
          - name: strict
            match: { path_prefix: / }
            upstream: api
        """

    /// The gate's own pre-check lets out-of-order counters through to the store (which holds
    /// the seen-map), and the store refuses the replays, also from a gate with a cold cache.
    @Test func outOfOrderCountersPassOnceThroughTheGate() async throws {
        let store = MemoryStore()
        let h = try ProofHarness(routes: Self.routes, store: store)
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        for counter: UInt32 in [5, 3, 4, 2] {
            let decision = try await h.send(device, counter: counter, target: "/p/x")
            #expect(decision.forwardedHead?.headers["X-App-Attest-Counter"] == String(counter), "\(counter)")
        }
        #expect(try await h.send(device, counter: 1, target: "/p/x").errorCode == "counter_replay", "5 - 4 = 1")
        let cold = try ProofHarness(routes: Self.routes, store: store)
        for counter: UInt32 in [2, 3, 4, 5] {
            let replay = try await cold.send(device, counter: counter, target: "/p/x")
            #expect(replay.errorCode == "counter_replay", "\(counter)")
            #expect((replay.json?["message"] as? String)?.contains("window of 4") == true)
        }
        // The strict route refuses what the windowed one would take.
        #expect(try await h.send(device, counter: 7, target: "/other").forwardedHead != nil)
        #expect(try await h.send(device, counter: 6, target: "/other").errorCode == "counter_replay")
        #expect(CounterWindow.lowestRefused(highest: 10, window: 0) == 10)
        #expect(CounterWindow.lowestRefused(highest: 10, window: 4) == 6)
        #expect(CounterWindow.lowestRefused(highest: 3, window: 4) == 0)
    }
}

@Suite struct RolloutTests {
    static func keyID() -> String {
        Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
    }

    @Test(arguments: [1, 10, 30, 50, 90])
    func splitOverTenThousandKeysIsWithinThreePercent(percent: Int) {
        let keys = (0..<10_000).map { _ in Self.keyID() }
        let enforced = keys.filter { RolloutArm.of($0, percent: percent) == .enforce }.count
        let share = Double(enforced) / 100.0
        #expect(abs(share - Double(percent)) <= 3, "\(share)% enforced for enforce_percent \(percent)")
    }

    @Test func armsNestAsThePercentageGrows() {
        // Raising 10 → 50 → 100 only moves clients from monitor to enforce, never back.
        for _ in 0..<2000 {
            let key = Self.keyID()
            let bucket = RolloutArm.bucket(key)
            for percent in [0, 10, 50, 100] {
                #expect(
                    (RolloutArm.of(key, percent: percent) == .enforce) == (bucket < UInt64(percent) || percent == 100))
            }
        }
    }

    static let routes = """
          - name: rollout
            match: { path_prefix: /v1/ }
            upstream: api
            enforce_percent: 30
        """

    /// Two gateways (separate gates, separate processes' worth of state) put every key in the
    /// same arm; the enforce arm refuses, the monitor arm forwards marked.
    @Test func twoGatewaysAgreeAndTheArmIsVisible() async throws {
        let store = MemoryStore()
        let a = try ProofHarness(routes: Self.routes, store: store)
        let b = try ProofHarness(routes: Self.routes, store: store)
        var enforced = 0
        let total = 1000
        for _ in 0..<total {
            let key = Self.keyID()
            let head = request("GET", "/v1/x", headers: [("X-App-Attest-Key-Id", key), ("X-App-Assertion", "oA==")])
            let first = await runGate(a.gate, head, body: []).1
            let second = await runGate(b.gate, head, body: []).1
            let arm = RolloutArm.of(key, percent: 30)
            #expect(first.logInfo.arm == arm && second.logInfo.arm == arm)
            switch arm {
            case .enforce:
                enforced += 1
                #expect(first.status == 401 && second.status == 401)
            case .monitor:
                #expect(first.forwardedHead?.headers["X-App-Attest-Rollout-Arm"] == "monitor")
                #expect(second.forwardedHead?.headers["X-App-Attest-Status"]?.hasPrefix("failed; reason=") == true)
            }
        }
        #expect(abs(Double(enforced) / Double(total) * 100 - 30) <= 6)
        let counts = a.metrics.snapshot.rollout
        // Unknown keys: the same verdict in both arms, counted per arm.
        #expect(counts["rollout|enforce|unknown_key", default: 0] == enforced, "\(counts)")
        #expect(counts["rollout|monitor|unknown_key", default: 0] == total - enforced)
    }

    @Test func keylessRequestsUseTheClientAddress() async throws {
        let h = try ProofHarness(routes: Self.routes)
        let head = request("GET", "/v1/x")
        for address in ["10.0.0.1", "10.0.0.2", "192.168.7.9", "2001:db8::1"] {
            // The proxy passes the client address's limit key (an IPv6 client's /64).
            let key = IPAddressBytes.limitKey(address)
            let decision = await runGate(h.gate, head, body: [], client: key).1
            let arm = RolloutArm.of(key, percent: 30)
            #expect(decision.logInfo.arm == arm)
            #expect((decision.status == 401) == (arm == .enforce), "\(address)")
        }
    }

    @Test func verifiedRequestsCarryTheArmAndFullRolloutHasNoArm() async throws {
        let h = try ProofHarness(
            routes: Self.routes + """

                  - name: full
                    match: { path_prefix: /full/ }
                    upstream: api
                """)
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let arm = RolloutArm.of(Data(device.keyID).base64EncodedString(), percent: 30)
        let verified = try #require(try await h.send(device, counter: 1, target: "/v1/x").forwardedHead)
        #expect(verified.headers["X-App-Attest-Status"] == "verified")
        #expect(verified.headers["X-App-Attest-Rollout-Arm"] == arm.rawValue)
        let full = try #require(try await h.send(device, counter: 2, target: "/full/x").forwardedHead)
        #expect(full.headers["X-App-Attest-Rollout-Arm"] == nil)
    }
}

@Suite struct DebugTokenTests {
    static let routes = """
          - name: ci
            match: { path_prefix: /ci/ }
            upstream: api
            allow_debug_tokens: true
          - name: api
            match: { path_prefix: / }
            upstream: api
        """

    @Test func tokensAreWellFormedAndDistinct() {
        let tokens = (0..<100).map { _ in DebugTokens.generate() }
        #expect(Set(tokens).count == 100)
        #expect(tokens.allSatisfy(DebugTokens.isWellFormed))
        #expect(!DebugTokens.isWellFormed("agdt_short"))
        #expect(!DebugTokens.isWellFormed(String(tokens[0].dropFirst(5)) + "xxxxx"))
        #expect(DebugTokens.digest(tokens[0]).count == 64)
        #expect(DebugTokenAdministration.lifetime("30d") == TimeInterval(30 * 86_400))
        #expect(DebugTokenAdministration.lifetime("90m") == 5400)
        #expect(DebugTokenAdministration.lifetime("367d") == nil)
        #expect(DebugTokenAdministration.lifetime("0s") == nil)
        #expect(DebugTokenAdministration.lifetime("1w") == nil)
    }

    @Test func onlyAllowingRoutesAcceptValidTokens() async throws {
        let clock = Mutex<Date>(Date(timeIntervalSince1970: 1_800_000_000))
        let store = MemoryStore()
        let h = try ProofHarness(routes: Self.routes, store: store, now: { clock.withLock { $0 } })
        let start = clock.withLock { $0 }
        guard
            let (token, _) = try DebugTokenAdministration.create(
                store, name: "ci-main", lifetime: 3600, now: start, timeout: .seconds(1))
        else {
            Issue.record("not created")
            return
        }
        let head = request("GET", "/ci/build", headers: [("X-App-Attest-Debug-Token", token)])
        let admitted = try #require(await runGate(h.gate, head, body: []).1.forwardedHead)
        #expect(admitted.headers["X-App-Attest-Status"] == "debug")
        #expect(admitted.headers["X-App-Attest-Debug-Token-Name"] == "ci-main")
        #expect(admitted.headers["X-App-Attest-Debug-Token"] == nil, "the secret is not forwarded")
        #expect(h.metrics.snapshot.requests["ci|debug"] == 1)

        let elsewhere = await runGate(
            h.gate, request("GET", "/other", headers: [("X-App-Attest-Debug-Token", token)]), body: []
        ).1
        #expect(elsewhere.status == 403 && elsewhere.errorCode == "debug_token_not_allowed")

        let bogus = await runGate(
            h.gate, request("GET", "/ci/x", headers: [("X-App-Attest-Debug-Token", "nope")]), body: []
        ).1
        #expect(bogus.status == 401 && bogus.errorCode == "debug_token_invalid")
        let unknown = await runGate(
            h.gate, request("GET", "/ci/x", headers: [("X-App-Attest-Debug-Token", DebugTokens.generate())]), body: []
        ).1
        #expect(unknown.errorCode == "debug_token_invalid")

        clock.withLock { $0 = start.addingTimeInterval(3600) }
        let expired = await runGate(h.gate, head, body: []).1
        #expect(expired.errorCode == "debug_token_invalid")
        #expect((expired.json?["message"] as? String)?.contains("ci-main has expired") == true)

        clock.withLock { $0 = start.addingTimeInterval(10) }
        #expect(await runGate(h.gate, head, body: []).1.forwardedHead != nil)
        #expect(try DebugTokenAdministration.revoke(store, name: "ci-main", timeout: .seconds(1)))
        #expect(await runGate(h.gate, head, body: []).1.errorCode == "debug_token_invalid")
    }
}

/// macOS 27's key access-control extension and `app_validation.macos_full_security`.
@Suite struct MacOSPosturePolicyTests {
    static let routes = """
          - name: mac_only
            match: { path_prefix: /v1/mac }
            upstream: api
            app_validation: { macos_full_security: true }
          - name: any
            match: { path_prefix: /v1/ }
            upstream: api
        """

    @Test func fullSecurityKeyIsAdmittedStoredAndForwarded() async throws {
        let h = try ProofHarness(routes: Self.routes)
        let mac = try SimulatedDevice.generate()
        let attested = try await h.attest(mac, keyAccessPolicyBlob: KeyAccessPolicyBlob.macOSFullSecurity)
        #expect(attested.status == 201)
        #expect(attested.json?["key_access_policy"] as? String == "macos_full_security")
        let record = try #require(await h.store.fetchKey(keyID: Data(mac.keyID).base64EncodedString()).value ?? nil)
        #expect(record.keyAccessPolicy == "macos_full_security")
        let forwarded = try #require(try await h.send(mac, counter: 1, target: "/v1/mac/x").forwardedHead)
        #expect(forwarded.headers["X-App-Attest-Key-Access-Policy"] == "macos_full_security")
    }

    @Test(arguments: [nil, KeyAccessPolicyBlob.reducedSecurity])
    func otherKeysAreRefusedOnTheRouteOnly(blob: [UInt8]?) async throws {
        let h = try ProofHarness(routes: Self.routes)
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device, keyAccessPolicyBlob: blob).status == 201)
        let refused = try await h.send(device, counter: 1, target: "/v1/mac/x")
        #expect(refused.status == 403)
        #expect(refused.json?["error"] as? String == "macos_posture_refused")
        let elsewhere = try #require(try await h.send(device, counter: 2, target: "/v1/other").forwardedHead)
        #expect(
            elsewhere.headers["X-App-Attest-Key-Access-Policy"] == (blob == nil ? nil : "other"),
            "reported where the route does not judge it")
    }

    @Test func policyKeyIsReadAndSummarised() throws {
        let policy = try PolicyLoader.parse(
            """
            store: memory
            app_ids: ["\(ProofHarness.appID)"]
            upstreams: { api: { url: "http://127.0.0.1:9000" } }
            app_validation: { macos_full_security: true }
            routes: [ { match: { path_prefix: / }, upstream: api } ]
            """, sourcePath: "p.yaml")
        #expect(policy.routes[0].appValidation?.requiresMacOSFullSecurity == true)
        #expect(PolicySummary.describeAttestationKeys(policy.routes[0]).contains("macos_full_security=true"))
    }
}
