import Foundation
import GatewayTesting
import Simulator
import Testing

extension EndToEnd {
    /// Android Keystore keys through the built binary and a real Redis: enrollment on the
    /// attest endpoint (a chain under a test root configured as `android.trust_anchors`),
    /// signed requests, each refusal's own code, the one-of-N race, and route `platforms`.
    @Suite struct Android {
        static let package = "com.example.app"

        static let routes = """
              - name: ios_only
                match: { path_prefix: /ios/ }
                upstream: api
                mode: enforce
                platforms: [ios]
              - name: android_only
                match: { path_prefix: /android/ }
                upstream: api
                mode: enforce
                platforms: [android]
            \(TestRoutes.standard)
            """

        /// The world, its Android authority (root written for the policy) and the `android:` block.
        struct AndroidWorld {
            let world: E2EWorld
            let authority: SimulatedAndroidAuthority
            let gateway: GatewayInstance
            /// The `android:` block of the policy without its `revocation:` line (another
            /// gateway of the same world adds its own).
            let androidBlock: String

            /// - Parameters:
            ///   - appSettings: more keys of the app entry, one line (e.g. `play_integrity: {…}`).
            ///   - revocation: the `revocation:` line of `android:` (off: no status list; the
            ///     revocation tests point it at a fake).
            init(extraLimits: String = "", appSettings: String = "", revocation: String = "revocation: off") throws {
                let world = try E2EWorld()
                let authority = try SimulatedAndroidAuthority.generate()
                let directory = world.directory.file("android")
                try authority.save(directory: directory)
                let root = (directory as NSString).appendingPathComponent(
                    SimulatedAndroidAuthority.FileName.rootCertificate)
                let digest = AndroidAttestationOptions.defaultSigningDigest.map { String(format: "%02X", $0) }
                    .joined(separator: ":")
                let android = """
                    \(extraLimits)
                    android:
                      apps:
                        - package: \(Android.package)
                          signing_digests: ["\(digest)"]
                          \(appSettings)
                      trust_anchors: ["\(root)"]
                    """
                self.world = world
                self.authority = authority
                self.androidBlock = android
                self.gateway = try world.startGateway(
                    "gw", extra: android + "\n  " + revocation, routes: Android.routes)
            }

            func challenge() throws -> String {
                let response = try self.gateway.request("POST", "/app-attest/challenge")
                guard response.status == 200, let challenge = try response.json()["challenge"] as? String else {
                    throw E2EError("challenge endpoint answered \(response)")
                }
                return challenge
            }

            /// A key over a fresh challenge, enrolled; the gateway's answer.
            func enroll(_ options: AndroidAttestationOptions = AndroidAttestationOptions()) throws -> (
                AndroidReferenceClient, HTTPResponse
            ) {
                let challenge = try self.challenge()
                let key = try self.authority.generateKey(challenge: Array(challenge.utf8), options: options)
                let client = AndroidReferenceClient(key: key)
                let response = try self.gateway.request(
                    "POST", "/app-attest/attest", headers: [("Content-Type", "application/json")],
                    body: AndroidReferenceClient.enrollmentBody(challenge: challenge, chain: key.chain))
                return (client, response)
            }

            func send(
                _ client: AndroidReferenceClient, _ method: String, _ target: String, body: [UInt8] = [],
                challenge: String? = nil, headers extra: [(String, String)] = []
            ) throws -> HTTPResponse {
                let assertion = try client.assertion(
                    method: method, target: target, body: body, challenge: challenge ?? "")
                return try self.gateway.request(
                    method, target, headers: client.headers(assertion: assertion, challenge: challenge) + extra,
                    body: body)
            }
        }

        @Test(.timeLimit(.minutes(2)))
        func enrollSignAndEachRefusalHasItsOwnCode() throws {
            let android = try AndroidWorld()
            defer { android.world.shutDown() }

            let (client, enrolled) = try android.enroll()
            #expect(enrolled.status == 201, "\(enrolled)")
            let answer = try enrolled.json()
            #expect(answer["key_id"] as? String == client.keyID)
            #expect(answer["platform"] as? String == "android")
            #expect(answer["app_id"] as? String == Self.package)

            // A signed request passes; the upstream learns the platform.
            let first = try android.send(client, "GET", "/v1/items?page=1")
            #expect(first.status == 200, "\(first)")
            let echo = try UpstreamEcho(first)
            #expect(echo.values("x-app-attest-status") == ["verified"])
            #expect(echo.values("x-app-attest-platform") == ["android"])
            #expect(echo.values("x-app-attest-key-id") == [client.keyID])
            #expect(echo.values("x-app-attest-app-id") == [Self.package])
            #expect(echo.values("x-app-attest-counter") == ["1"])

            // A body and a challenge-bound route.
            let body = Array(#"{"amount":5}"#.utf8)
            #expect(try android.send(client, "POST", "/v1/transfers", body: body).status == 200)
            let challenge = try android.challenge()
            #expect(try android.send(client, "POST", "/v1/premium/buy", body: body, challenge: challenge).status == 200)

            // Replay: the same headers again.
            let assertion = try client.assertion(method: "GET", target: "/v1/replayed")
            let headers = client.headers(assertion: assertion)
            #expect(try android.gateway.request("GET", "/v1/replayed", headers: headers).status == 200)
            expectDenied(try android.gateway.request("GET", "/v1/replayed", headers: headers), 401, "counter_replay")

            // Tampered body: signed over one body, sent with another.
            let signed = try client.assertion(method: "POST", target: "/v1/transfers", body: body)
            expectDenied(
                try android.gateway.request(
                    "POST", "/v1/transfers", headers: client.headers(assertion: signed),
                    body: Array(#"{"amount":500}"#.utf8)),
                401, "android_request_signature_invalid")

            // Enrollment refusals, each with its own code.
            var wrongPackage = AndroidAttestationOptions()
            wrongPackage.packageName = "com.example.other"
            expectDenied(try android.enroll(wrongPackage).1, 403, "android_package_mismatch")
            var wrongDigest = AndroidAttestationOptions()
            wrongDigest.signingDigests = [[UInt8](repeating: 7, count: 32)]
            expectDenied(try android.enroll(wrongDigest).1, 403, "android_signing_digest_mismatch")
            var unlocked = AndroidAttestationOptions()
            unlocked.deviceLocked = false
            unlocked.verifiedBootState = 2
            expectDenied(try android.enroll(unlocked).1, 403, "android_bootloader_unlocked")
            var software = AndroidAttestationOptions()
            software.securityLevel = 0
            expectDenied(try android.enroll(software).1, 403, "android_security_level_software")
            var imported = AndroidAttestationOptions()
            imported.origin = 2
            expectDenied(try android.enroll(imported).1, 403, "android_key_origin_refused")

            // The challenge is the attestation challenge: another one's chain is refused, and a
            // challenge is good once.
            let issued = try android.challenge()
            let other = try android.authority.generateKey(challenge: Array("not the issued one".utf8))
            expectDenied(
                try android.gateway.request(
                    "POST", "/app-attest/attest",
                    body: AndroidReferenceClient.enrollmentBody(challenge: issued, chain: other.chain)),
                401, "android_challenge_mismatch")
            let once = try android.authority.generateKey(challenge: Array(issued.utf8))
            let onceBody = AndroidReferenceClient.enrollmentBody(challenge: issued, chain: once.chain)
            #expect(try android.gateway.request("POST", "/app-attest/attest", body: onceBody).status == 201)
            let again = try android.authority.generateKey(challenge: Array(issued.utf8))
            expectDenied(
                try android.gateway.request(
                    "POST", "/app-attest/attest",
                    body: AndroidReferenceClient.enrollmentBody(challenge: issued, chain: again.chain)),
                401, "challenge_invalid")

            // Route platforms, both ways.
            expectDenied(try android.send(client, "GET", "/ios/profile"), 403, "platform_android_refused")
            #expect(try android.send(client, "GET", "/android/profile").status == 200)
            let app = try android.world.app()
            #expect(try app.attest(with: android.gateway).status == 201)
            expectDenied(try app.send("GET", "/android/profile", to: android.gateway), 403, "platform_ios_refused")
            #expect(try app.send("GET", "/ios/profile", to: android.gateway).status == 200)

            // Metrics by platform.
            let metrics = try android.gateway.metrics()
            #expect(
                (metrics[#"attest_gateway_platform_verified_total{platform="android",kind="request"}"#] ?? 0) == 5,
                "\(metrics.filter { $0.key.contains("platform") })")
            #expect(
                (metrics[#"attest_gateway_platform_verified_total{platform="android",kind="enrollment"}"#] ?? 0) == 2)
            #expect((metrics[#"attest_gateway_platform_verified_total{platform="ios",kind="request"}"#] ?? 0) == 1)

            // `keys show` names the platform.
            let show = try android.world.runGateway(["keys", "show", client.keyID, "--redis", android.world.redis.url])
            #expect(show.stdout.contains(#""platform":"android""#), "\(show.stdout)")
        }

        /// 200 copies of one signed request at once: the store's counter script lets exactly one through.
        @Test(.timeLimit(.minutes(2)))
        func twoHundredConcurrentCopiesExactlyOnePasses() throws {
            let android = try AndroidWorld(extraLimits: E2EWorld.raceLimits)
            defer { android.world.shutDown() }
            let (client, enrolled) = try android.enroll()
            #expect(enrolled.status == 201, "\(enrolled)")
            let body = Array(#"{"transfer":100}"#.utf8)
            let assertion = try client.assertion(method: "POST", target: "/v1/transfers", body: body)
            let total = 200
            let requests = (0..<total).map { _ in
                HTTPRequest(
                    port: android.gateway.ports.proxy, "POST", "/v1/transfers",
                    headers: client.headers(assertion: assertion), body: body)
            }
            var passed = 0
            var replays = 0
            var other: [String] = []
            for result in HTTPClient.sendAll(requests, timeout: .seconds(45)) {
                switch result {
                case .success(let response) where response.status == 200: passed += 1
                case .success(let response) where response.status == 401 && response.errorCode == "counter_replay":
                    replays += 1
                case .success(let response): other.append("\(response)")
                case .failure(let error): other.append("\(error)")
                }
            }
            #expect(other.isEmpty, "unexpected: \(other.prefix(3))")
            #expect(passed == 1)
            #expect(replays == total - 1)
        }
    }
}
