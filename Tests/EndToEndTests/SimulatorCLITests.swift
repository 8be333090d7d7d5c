import Foundation
import Testing

extension EndToEnd {
    /// The `attest-gateway sim` commands play the app against the running binary, as
    /// `make run` does with curl: init reuses the CA the policy trusts, attest mints a key and
    /// its attestation, assert signs clientData with the next counter kept in the directory.
    @Suite struct SimulatorCLI {
        static func json(_ run: ToolRun) throws -> [String: Any] {
            guard run.status == 0,
                let object = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
            else { throw E2EError("exit \(run.status): \(run.stdout) \(run.stderr)") }
            return object
        }

        @Test(.timeLimit(.minutes(1)))
        func simCommandsPlayTheAppAgainstTheGateway() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("gw", routes: TestRoutes.standard)
            let simDirectory = world.directory.file("sim")

            let initialized = try Self.json(world.runGateway(["sim", "init", "--dir", simDirectory]))
            #expect(initialized["root_ca"] as? String == world.trustRootPath)

            let challengeResponse = try gateway.request("POST", "/app-attest/challenge")
            let challenge = try #require(try challengeResponse.json()["challenge"] as? String)
            let minted = try Self.json(
                world.runGateway([
                    "sim", "attest", "--dir", simDirectory, "--app-id", TestPolicy.appID, "--challenge", challenge,
                    "--environment", "production",
                ])
            )
            let keyID = try #require(minted["key_id"] as? String)
            let attestation = try #require(minted["attestation"] as? String)
            let attested = try gateway.request(
                "POST",
                "/app-attest/attest",
                body: #"{"key_id":"\#(keyID)","attestation":"\#(attestation)","challenge":"\#(challenge)"}"#
            )
            #expect(attested.status == 201, "\(attested)")

            let body = Array(#"{"item":"sku-42"}"#.utf8)
            let target = "/v1/orders?source=cli"
            let clientData = Data(SimulatedApp.clientData(method: "POST", target: target, body: body, challenge: ""))
            for expectedCounter in 1...2 {
                let signed = try Self.json(
                    world.runGateway([
                        "sim", "assert", "--dir", simDirectory, "--key-id", keyID, "--app-id", TestPolicy.appID,
                        "--client-data", clientData.base64EncodedString(),
                    ])
                )
                #expect(signed["counter"] as? Int == expectedCounter)
                let assertion = try #require(signed["assertion"] as? String)
                let response = try gateway.request(
                    "POST",
                    target,
                    headers: [("X-App-Attest-Key-Id", keyID), ("X-App-Assertion", assertion)],
                    body: body
                )
                #expect(response.status == 200, "\(response)")
                #expect(try UpstreamEcho(response).appHeaders["x-app-attest-counter"] == [String(expectedCounter)])
                // The same CLI assertion again is a replay.
                expectDenied(
                    try gateway.request(
                        "POST",
                        target,
                        headers: [("X-App-Attest-Key-Id", keyID), ("X-App-Assertion", assertion)],
                        body: body
                    ),
                    401,
                    "counter_replay"
                )
            }
        }

        /// `sim android-enroll` prints an enrollment body the gateway accepts as sent (JSON, the
        /// chain under DIR's test root), and `sim android-sign` signs a request from its parts or
        /// from `--client-data` (what the doors check sends): both pass once, a replay does not,
        /// and the two forms refuse to be mixed.
        @Test(.timeLimit(.minutes(1)))
        func simAndroidCommandsPlayTheAppAgainstTheGateway() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let simDirectory = world.directory.file("sim")
            // The first android-enroll makes the test root the policy lists.
            let bootstrap = try Self.json(
                world.runGateway(["sim", "android-enroll", "--dir", simDirectory, "--challenge", "bootstrap"]))
            let root = try #require(bootstrap["root"] as? String)
            let digest = try #require(bootstrap["signing_digest"] as? String)
            let android = """
                android:
                  apps: [{ package: com.example.app, signing_digests: ["\(digest)"] }]
                  trust_anchors: ["\(root)"]
                  revocation: off
                """
            let gateway = try world.startGateway("gw", extra: android, routes: TestRoutes.standard)

            let challengeResponse = try gateway.request("POST", "/app-attest/challenge")
            let challenge = try #require(try challengeResponse.json()["challenge"] as? String)
            let minted = try Self.json(
                world.runGateway(["sim", "android-enroll", "--dir", simDirectory, "--challenge", challenge]))
            let keyID = try #require(minted["key_id"] as? String)
            let body = try #require(minted["body"] as? String)
            let parsed = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
            #expect(parsed?["challenge"] as? String == challenge)
            let enrolled = try gateway.request(
                "POST", "/app-attest/attest", headers: [("Content-Type", "application/json")], body: Array(body.utf8))
            #expect(enrolled.status == 201, "\(enrolled)")
            #expect(try enrolled.json()["key_id"] as? String == keyID)

            let target = "/v1/orders?source=cli"
            let requestBody = #"{"item":"sku-42"}"#
            let clientData = Data(
                SimulatedApp.clientData(method: "POST", target: target, body: Array(requestBody.utf8), challenge: ""))
            let fromParts = [
                "sim", "android-sign", "--dir", simDirectory, "--key-id", keyID, "--counter", "1", "--method", "POST",
                "--target", target, "--body", requestBody,
            ]
            let fromClientData = [
                "sim", "android-sign", "--dir", simDirectory, "--key-id", keyID, "--counter", "2", "--client-data",
                clientData.base64EncodedString(),
            ]
            for (arguments, counter) in [(fromParts, 1), (fromClientData, 2)] {
                let signed = try Self.json(world.runGateway(arguments))
                #expect(signed["counter"] as? Int == counter)
                let assertion = try #require(signed["assertion"] as? String)
                let headers = [("X-App-Attest-Key-Id", keyID), ("X-App-Assertion", assertion)]
                let response = try gateway.request("POST", target, headers: headers, body: Array(requestBody.utf8))
                #expect(response.status == 200, "\(response)")
                #expect(try UpstreamEcho(response).appHeaders["x-app-attest-platform"] == ["android"])
                expectDenied(
                    try gateway.request("POST", target, headers: headers, body: Array(requestBody.utf8)), 401,
                    "counter_replay")
            }
            let mixed = try world.runGateway(fromClientData + ["--method", "POST"])
            #expect(mixed.status == 2, "\(mixed.stdout) \(mixed.stderr)")
            #expect(mixed.stderr.contains("--client-data and --method exclude each other"), "\(mixed.stderr)")
        }
    }
}
