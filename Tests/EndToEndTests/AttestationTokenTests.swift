import Dispatch
import Foundation
import GatewayTesting
import Simulator
import Synchronization
import Testing
import Verification

extension EndToEnd {
    /// Issue 34's tokens through the built binary and a real Redis: a verified app gets an ES256
    /// token; PyJWT and jwcrypto verify it through the JWKS URL; token routes accept it and refuse
    /// expired, wrong-audience, re-signed, `alg: none`, HS256-with-the-public-key, malformed and
    /// replayed limited-use tokens with their codes; concurrent copies of a limited-use token pass
    /// once; a rotation keeps the old key's tokens valid.
    @Suite struct AttestationTokens {
        static let issuer = "https://attest.example.com"

        static let routes = """
              - name: orders_token
                match: { path_prefix: /tok/orders }
                upstream: api
                mode: enforce
                accept_token: { audience: orders }
              - name: pay_token
                match: { path_prefix: /tok/pay }
                upstream: api
                mode: enforce
                accept_token: { audience: payments, limited_use: true }
            """ + "\n" + TestRoutes.standard

        static func tokensBlock(directory: TemporaryDirectory, active: String) -> String {
            """
            tokens:
              issuer: \(Self.issuer)
              active_kid: \(active)
              keys:
                - {kid: t1, key_file: \(directory.file("t1.pem"))}
                - {kid: t2, key_file: \(directory.file("t2.pem"))}
              subject_key_file: \(directory.file("token-subject"))
              audiences:
                - {name: orders}
                - {name: payments, ttl: 2m}
              clock_skew: 1s
            """
        }

        /// `POST /app-attest/token` signed by `app`: the token, or a failed expectation.
        static func token(_ app: SimulatedApp, audience: String, from gateway: GatewayInstance) throws -> String {
            let body = Array(#"{"audience":"\#(audience)"}"#.utf8)
            let assertion = try app.assertion(method: "POST", target: "/app-attest/token", body: body)
            let response = try gateway.request(
                "POST", "/app-attest/token",
                headers: app.headers(assertion: assertion) + [("Content-Type", "application/json")], body: body)
            #expect(response.status == 200, "\(response)")
            #expect(response.header("Cache-Control") == "no-store")
            return try #require(try response.json()["token"] as? String)
        }

        static func call(_ target: String, token: String, on gateway: GatewayInstance) throws -> HTTPResponse {
            try gateway.request("GET", target, headers: [("Authorization", "Bearer " + token)])
        }

        static func errorCode(_ response: HTTPResponse) -> String? {
            (try? response.json())?["error"] as? String
        }

        /// `header.payload.` with `header` as given: forged headers over a real payload.
        static func reheader(_ token: String, header: String) -> String {
            let parts = token.split(separator: ".", omittingEmptySubsequences: false)
            return Base64URL.encode(Array(header.utf8)) + "." + parts[1] + "."
        }

        @Test(.timeLimit(.minutes(2)))
        func tokensAreIssuedVerifiedByStandardLibrariesAndJudgedOnRoutes() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let t1 = try SimulatedDevice.generate().privateKeyPEM
            _ = try world.directory.write("t1.pem", t1)
            _ = try world.directory.write("t2.pem", try SimulatedDevice.generate().privateKeyPEM)
            _ = try world.directory.write("token-subject", "a-subject-secret-of-at-least-32-bytes")
            let gateway = try world.startGateway(
                "gw", extra: Self.tokensBlock(directory: world.directory, active: "t1"), routes: Self.routes)
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)

            // Issued, then verified by PyJWT and jwcrypto through the gateway's JWKS URL.
            let orders = try Self.token(app, audience: "orders", from: gateway)
            let jwks = try gateway.request("GET", "/.well-known/jwks.json")
            #expect(jwks.status == 200 && jwks.header("Cache-Control") == "public, max-age=300")
            let discovery = try gateway.request("GET", "/.well-known/openid-configuration").json()
            #expect(discovery["jwks_uri"] as? String == Self.issuer + "/.well-known/jwks.json")

            // Forgeries, each over the real token's claims.
            let claims = try CompactJWS(orders).claims()
            let realKey = try ECPrivateKey(pkcs8PEM: t1)
            var stale = claims
            stale.issuedAt -= 600
            stale.expiresAt = stale.issuedAt + 300
            let expired = try TokenSigner(kid: "t1", key: realKey).sign(stale)
            let resigned = try TokenSigner(
                kid: "t1", key: try ECPrivateKey(pkcs8PEM: try SimulatedDevice.generate().privateKeyPEM)
            )
            .sign(claims)
            let unsigned = Self.reheader(orders, header: #"{"alg":"none","kid":"t1","typ":"JWT"}"#)
            let hsInput = String(Self.reheader(orders, header: #"{"alg":"HS256","kid":"t1","typ":"JWT"}"#).dropLast())
            // The classic confusion: HMAC keyed with the published public key, as JWKS and as PEM-less point.
            let hs256 = [jwks.body, realKey.publicKeyX962].map { secret in
                hsInput + "."
                    + Base64URL.encode(HMACSHA256.authenticationCode(key: secret, message: Array(hsInput.utf8)))
            }

            let jwksURL = "http://127.0.0.1:\(gateway.ports.proxy)/.well-known/jwks.json"
            let python = try ToolRun.run(
                "/usr/bin/python3",
                [
                    E2EPaths.repositoryRoot.appendingPathComponent("scripts/verify-attestation-token.py").path, jwksURL,
                    Self.issuer, "orders", orders, expired, resigned, unsigned,
                ] + hs256,
                in: world.directory)
            #expect(python.status == 0, "\(python.stdout) \(python.stderr)")
            let verified = try #require(
                try JSONSerialization.jsonObject(with: Data(python.stdout.utf8)) as? [String: Any])
            for library in ["pyjwt", "jwcrypto"] {
                let seen = try #require(verified[library] as? [String: Any], "\(library)")
                #expect(seen["sub"] as? String == claims.subject && seen["aud"] as? String == "orders", "\(library)")
                #expect(seen["app_id"] as? String == TestPolicy.appID, "\(library)")
                #expect(seen["platform"] as? String == "ios", "\(library)")
            }
            #expect((verified["refused"] as? [Any])?.count == 5)
            #expect(claims.subject != app.keyID && !orders.contains(app.keyID), "sub is a keyed hash, never the key ID")

            // The route accepts it instead of an assertion.
            let passed = try Self.call("/tok/orders/1", token: orders, on: gateway)
            #expect(passed.status == 200, "\(passed)")
            #expect(try UpstreamEcho(passed).appHeaders["x-app-attest-status"] == ["token"])

            // Each refusal with its code.
            let refusals: [(String, String, Int, String)] = [
                ("/tok/orders", expired, 401, "token_expired"),
                ("/tok/pay", orders, 403, "token_audience_mismatch"),
                ("/tok/orders", resigned, 401, "token_signature_invalid"),
                ("/tok/orders", unsigned, 401, "token_algorithm_refused"),
                ("/tok/orders", hs256[0], 401, "token_algorithm_refused"),
                ("/tok/orders", hs256[1], 401, "token_algorithm_refused"),
                ("/tok/orders", "not-a-token", 401, "token_malformed"),
            ]
            for (target, token, status, code) in refusals {
                let refused = try Self.call(target, token: token, on: gateway)
                #expect(refused.status == status && Self.errorCode(refused) == code, "\(code): \(refused)")
            }

            // Limited use: once, then token_replayed; N concurrent copies of another: exactly one passes.
            let pay = try Self.token(app, audience: "payments", from: gateway)
            #expect(try Self.call("/tok/pay", token: pay, on: gateway).status == 200)
            let replayed = try Self.call("/tok/pay", token: pay, on: gateway)
            #expect(replayed.status == 401 && Self.errorCode(replayed) == "token_replayed", "\(replayed)")
            let raced = try Self.token(app, audience: "payments", from: gateway)
            let statuses = Mutex([Int]())
            DispatchQueue.concurrentPerform(iterations: 24) { _ in
                let status = (try? Self.call("/tok/pay", token: raced, on: gateway))?.status ?? -1
                statuses.withLock { $0.append(status) }
            }
            let seen = statuses.withLock { $0 }
            #expect(seen.filter { $0 == 200 }.count == 1 && seen.filter { $0 == 401 }.count == 23, "\(seen)")

            // Rotation: t2 signs after a reload; t1's tokens stay valid until they expire.
            let reloadsBefore = gateway.logEvents("policy_reloaded").count
            try gateway.reload(
                with: world.policy(
                    ports: gateway.ports, extra: Self.tokensBlock(directory: world.directory, active: "t2"),
                    routes: Self.routes))
            let applied = gateway.child.waitForStderr(timeout: .seconds(10)) { _ in
                gateway.logEvents("policy_reloaded").count > reloadsBefore
            }
            #expect(applied, "no policy_reloaded event: \(gateway.child.stderr.suffix(800))")
            #expect(try Self.call("/tok/orders", token: orders, on: gateway).status == 200)
            let rotated = try Self.token(app, audience: "orders", from: gateway)
            #expect(try CompactJWS(rotated).header.kid == "t2")
            #expect(try Self.call("/tok/orders", token: rotated, on: gateway).status == 200)
        }
    }
}
