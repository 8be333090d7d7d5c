import Foundation
import GatewayTesting
import Glibc
import Testing

extension EndToEnd {
    /// Check-only mode (`authz_listen`): a real nginx (`auth_request`) and a real Caddy
    /// (`forward_auth`), each running the very configuration printed in docs/integrations.md, in
    /// front of the echo upstream, with the built gateway as the authorization service over the
    /// world's Redis. Envoy is not in Debian: its documented check requests are replayed as
    /// transcripts against the listener.
    @Suite struct Authz {
        /// The fenced block after `<!-- tested-config: NAME -->` in docs/integrations.md.
        static func documentedConfig(_ name: String) throws -> String {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            let doc = try String(
                contentsOf: root.appendingPathComponent("docs/integrations.md"), encoding: .utf8)
            guard let marker = doc.range(of: "<!-- tested-config: \(name) -->"),
                let open = doc.range(of: "```", range: marker.upperBound..<doc.endIndex),
                let lineEnd = doc.range(of: "\n", range: open.upperBound..<doc.endIndex),
                let close = doc.range(of: "\n```", range: lineEnd.upperBound..<doc.endIndex)
            else { throw E2EError("docs/integrations.md has no tested \(name) configuration") }
            return String(doc[lineEnd.upperBound..<close.lowerBound])
        }

        /// The documented addresses replaced by this test's ports.
        static func localize(_ text: String, front: String, frontPort: UInt16, authz: UInt16, upstream: UInt16)
            throws -> String
        {
            for address in [front, "127.0.0.1:9191", "127.0.0.1:9000"] where !text.contains(address) {
                throw E2EError("the documented configuration no longer names \(address)")
            }
            return text.replacingOccurrences(of: front, with: "127.0.0.1:\(frontPort)")
                .replacingOccurrences(of: "127.0.0.1:9191", with: "127.0.0.1:\(authz)")
                .replacingOccurrences(of: "127.0.0.1:9000", with: "127.0.0.1:\(upstream)")
        }

        static func startGateway(
            _ world: E2EWorld, name: String, trusted: String = "127.0.0.1", extra: String = ""
        ) throws -> (GatewayInstance, UInt16) {
            let authzPort = try freeServerPort()
            let gateway = try world.startGateway(
                name, extra: "authz_listen: 127.0.0.1:\(authzPort)\ntrusted_proxies: [\(trusted)]\n\(extra)",
                routes: TestRoutes.standard)
            return (gateway, authzPort)
        }

        static func waitListening(_ child: ChildProcess, port: UInt16) -> Bool {
            eventually(timeout: .seconds(10)) {
                guard child.isRunning else { return true }
                return (try? HTTPClient.send(HTTPRequest(port: port, "GET", "/public/ping"), timeout: .seconds(2)))
                    != nil
            } && child.isRunning
        }

        static func startNginx(_ world: E2EWorld, authz: UInt16) throws -> (ChildProcess, UInt16) {
            let d = world.directory.path
            let server = try Self.documentedConfig("nginx")
            for attempt in 0..<4 {
                let port = try freeServerPort()
                let configuration = """
                    daemon off;
                    master_process off;
                    pid \(d)/authz-nginx.pid;
                    error_log \(d)/authz-nginx-error.log info;
                    events { worker_connections 64; }
                    http {
                        access_log off;
                        client_body_temp_path \(d)/nginx-body;
                        proxy_temp_path \(d)/nginx-proxy;
                        fastcgi_temp_path \(d)/nginx-fastcgi;
                        uwsgi_temp_path \(d)/nginx-uwsgi;
                        scgi_temp_path \(d)/nginx-scgi;
                    \(try Self.localize(server, front: "127.0.0.1:8000", frontPort: port, authz: authz, upstream: world.upstream.port))
                    }
                    """
                let path = try world.directory.write("authz-nginx.conf", configuration)
                let child = try ChildProcess(
                    label: "authz-nginx-\(attempt)", executable: "/usr/sbin/nginx",
                    arguments: ["-p", d, "-e", "\(d)/authz-nginx-error.log", "-c", path], directory: world.directory)
                if Self.waitListening(child, port: port) { return (child, port) }
                child.kill()
            }
            throw E2EError(
                "nginx did not start: \((try? String(contentsOfFile: "\(d)/authz-nginx-error.log", encoding: .utf8)) ?? "")"
            )
        }

        static func startCaddy(_ world: E2EWorld, authz: UInt16) throws -> (ChildProcess, UInt16) {
            let d = world.directory.path
            let caddyfile = try Self.documentedConfig("caddy")
            for attempt in 0..<4 {
                let port = try freeServerPort()
                let path = try world.directory.write(
                    "Caddyfile",
                    try Self.localize(
                        caddyfile, front: "127.0.0.1:8001", frontPort: port, authz: authz,
                        upstream: world.upstream.port))
                // Its data and config directories in the test's own directory, not $HOME.
                let child = try ChildProcess(
                    label: "caddy-\(attempt)", executable: "/usr/bin/env",
                    arguments: [
                        "XDG_DATA_HOME=\(d)/caddy-data", "XDG_CONFIG_HOME=\(d)/caddy-config", "/usr/bin/caddy", "run",
                        "--config", path, "--adapter", "caddyfile",
                    ], directory: world.directory)
                if Self.waitListening(child, port: port) { return (child, port) }
                child.kill()
            }
            throw E2EError("caddy did not start")
        }

        static func send(
            port: UInt16, _ method: String, _ target: String, headers: [(String, String)], body: [UInt8] = []
        ) throws -> HTTPResponse {
            try HTTPClient.send(
                HTTPRequest(port: port, method, target, headers: headers, body: body), timeout: .seconds(10))
        }

        /// The identity headers the upstream saw with a value (an empty field carries none).
        static func identity(_ response: HTTPResponse) throws -> [String: [String]] {
            try UpstreamEcho(response).appHeaders.mapValues { $0.filter { !$0.isEmpty } }.filter { !$0.value.isEmpty }
        }

        /// The same flows through either proxy: verified, denied, replayed, tampered, spoofed,
        /// body-bound.
        /// `signingKey`: the HMAC key file of the gateway's `identity_signature`; the upstream's
        /// request is then checked with the documented Python verifier
        /// (docs/identity-signature/verify_signature.py), as an upstream would.
        static func exercise(
            proxy: String, port: UInt16, world: E2EWorld, gateway: GatewayInstance, signingKey: String? = nil
        ) throws {
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)
            // The start-up probe (GET /public/ping through the proxy) was checked too.
            let decisions = "attest_gateway_authz_decisions_total{dialect=\"forward_auth\",decision="
            let allowedBefore = try gateway.metrics()[decisions + "\"allowed\"}"] ?? 0
            let spoofed = [
                ("X-App-Attest-App-Id", "FORGED1234.com.evil.app"), ("X-App-Attest-Bundle-Version", "99.0"),
                ("X-App-Attest-Signature", "t=1, kid=forged, alg=hmac-sha256, sig=AAAA"),
            ]

            // Verified: the upstream sees exactly the gateway's identity, not the client's.
            let assertion = try app.assertion(method: "GET", target: "/v1/items?page=2")
            let verified = try Self.send(
                port: port, "GET", "/v1/items?page=2", headers: app.headers(assertion: assertion) + spoofed)
            #expect(verified.status == 200, "\(proxy): \(verified)")
            var seen = try Self.identity(verified)
            if let signingKey {
                try Self.verifySignature(of: try UpstreamEcho(verified), keyFile: signingKey, world: world)
                seen["x-app-attest-signature"] = nil
            }
            #expect(
                seen == [
                    "x-app-attest-status": ["verified"], "x-app-attest-key-id": [app.keyID],
                    "x-app-attest-app-id": [TestPolicy.appID], "x-app-attest-environment": ["production"],
                    "x-app-attest-counter": ["1"],
                ], "\(proxy): upstream saw \(seen)")
            #expect(try UpstreamEcho(verified).target == "/v1/items?page=2")

            // Replayed: the counter in Redis refuses it, and nothing reaches the upstream.
            let before = try world.upstream.requestCount()
            let replayed = try Self.send(
                port: port, "GET", "/v1/items?page=2", headers: app.headers(assertion: assertion))
            expectDenied(replayed, 401, "counter_replay")
            // Denied: no assertion at all.
            expectDenied(try Self.send(port: port, "GET", "/v1/items", headers: []), 401, "assertion_missing")
            // Tampered: an assertion for another target.
            let other = try app.assertion(method: "GET", target: "/v1/a")
            expectDenied(
                try Self.send(port: port, "GET", "/v1/b", headers: app.headers(assertion: other)), 401,
                "invalid_signature")
            // A route whose assertion covers the body: refused explicitly, not as a bad signature.
            let body = Array("{\"item\":42}".utf8)
            let posted = try app.assertion(method: "POST", target: "/v1/orders", body: body)
            expectDenied(
                try Self.send(
                    port: port, "POST", "/v1/orders",
                    headers: app.headers(assertion: posted) + [("Content-Type", "application/json")], body: body),
                403, "authz_body_required")
            #expect(try world.upstream.requestCount() == before, "\(proxy): a refused request reached the upstream")

            // Spoofed identity on a route that verifies nothing: the upstream sees `skipped` only.
            let open = try Self.send(
                port: port, "GET", "/public/x",
                headers: spoofed + [
                    ("X-App-Attest-Status", "verified"), ("X-App-Attest-Key-Id", "dmljdGltLWtleS1pZA=="),
                    ("X-App-Attest-Counter", "7"),
                ])
            #expect(open.status == 200, "\(proxy): \(open)")
            var openIdentity = try Self.identity(open)
            if let signingKey {
                // Signed too (every forward is), so the upstream can tell this `skipped` is ours.
                try Self.verifySignature(of: try UpstreamEcho(open), keyFile: signingKey, world: world)
                openIdentity["x-app-attest-signature"] = nil
            }
            #expect(openIdentity == ["x-app-attest-status": ["skipped"]], "\(proxy): \(openIdentity)")

            // The next assertion passes: the state is the inline gateway's.
            let next = try app.send("GET", "/v1/items", to: gateway)
            expectVerified(next, app: app, counter: app.counter)

            let metrics = try gateway.metrics()
            let allowed = (metrics[decisions + "\"allowed\"}"] ?? 0) - allowedBefore
            let denied = metrics[decisions + "\"denied\"}"] ?? 0
            #expect(allowed == 2, "\(proxy): allowed \(allowed)")
            #expect(denied == 4, "\(proxy): denied \(denied)")
            #expect(try gateway.verdictCount(route: "api", verdict: "counter_replay") == 1)
        }

        /// The upstream's view of the request verified by the documented verifier: the check
        /// signed the original method and target, and nginx delivered exactly the signed fields.
        static func verifySignature(of echo: UpstreamEcho, keyFile: String, world: E2EWorld) throws {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            let request = try JSONSerialization.data(
                withJSONObject: [
                    "method": echo.method, "target": echo.target, "headers": echo.headers.map { [$0.0, $0.1] },
                ])
            let input = try world.directory.write("signed-request.json", String(decoding: request, as: UTF8.self))
            let script = """
                import json, sys
                sys.path.insert(0, \(String(reflecting: root.appendingPathComponent("docs/identity-signature").path)))
                from verify_signature import verify_signature
                r = json.load(open(\(String(reflecting: input))))
                key = open(\(String(reflecting: keyFile)), "rb").read().strip()
                verify_signature(r["method"], r["target"], [tuple(h) for h in r["headers"]], {"k1": ("hmac-sha256", key)})
                print("ok")
                """
            let run = try ToolRun.run("/usr/bin/python3", ["-c", script], in: world.directory)
            #expect(run.status == 0 && run.stdout.contains("ok"), "verifier: \(run.stderr)")
        }

        @Test(.timeLimit(.minutes(1)))
        func nginxAuthRequestInFrontOfTheUpstream() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let key = try world.directory.write("identity-k1", "authz-e2e-identity-key-0123456789abcdef\n")
            let (gateway, authz) = try Self.startGateway(
                world, name: "authz-nginx",
                extra:
                    "identity_signature: {algorithm: hmac-sha256, active_kid: k1, keys: [{kid: k1, key_file: \(key)}]}"
            )
            let (nginx, port) = try Self.startNginx(world, authz: authz)
            defer { nginx.kill() }
            try Self.exercise(proxy: "nginx", port: port, world: world, gateway: gateway, signingKey: key)
        }

        @Test(.timeLimit(.minutes(1)))
        func caddyForwardAuthInFrontOfTheUpstream() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let key = try world.directory.write("identity-k1", "authz-e2e-identity-key-0123456789abcdef\n")
            let (gateway, authz) = try Self.startGateway(
                world, name: "authz-caddy",
                extra:
                    "identity_signature: {algorithm: hmac-sha256, active_kid: k1, keys: [{kid: k1, key_file: \(key)}]}"
            )
            let (caddy, port) = try Self.startCaddy(world, authz: authz)
            defer { caddy.kill() }
            try Self.exercise(proxy: "caddy", port: port, world: world, gateway: gateway, signingKey: key)
        }

        /// Envoy's HTTP ext_authz check requests, as its documentation describes them: the
        /// original method, `path_prefix` + path, the headers `allowed_headers` lets through, and
        /// with `with_request_body` the buffered body and `x-envoy-auth-partial-body`.
        /// `x_app_attest_status` is `X-App-Attest-Status` to a CGI or WSGI upstream. `listen` drops
        /// such names; the check listener keeps them (the front forwards the client's fields
        /// itself, so dropping would hide them from the check only) and refuses the gateway's and
        /// the trust headers' spellings, in both dialects; other underscore names pass.
        @Test(.timeLimit(.minutes(1)))
        func underscoreSpellingsAreRefusedByTheCheckAndDroppedInline() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let (gateway, authz) = try Self.startGateway(world, name: "authz-underscore")
            let forward = [("X-Forwarded-Method", "GET"), ("X-Forwarded-Uri", "/public/x")]
            expectDenied(
                try Self.send(
                    port: authz, "GET", "/forward-auth", headers: forward + [("x_app_attest_status", "verified")]),
                400, "underscore_gateway_header")
            expectDenied(
                try Self.send(
                    port: authz, "GET", "/ext_authz/public/x", headers: [("X-App_Attest-Key_Id", "c3Bvb2Y=")]),
                400, "underscore_gateway_header")
            expectDenied(
                try Self.send(port: authz, "GET", "/ext_authz/public/x", headers: [("x_real_ip", "203.0.113.9")]),
                400, "underscore_gateway_header")
            let other = try Self.send(port: authz, "GET", "/forward-auth", headers: forward + [("x_custom", "1")])
            #expect(other.status == 200, "\(other)")
            let inline = try Self.send(
                port: gateway.ports.proxy, "GET", "/public/x", headers: [("x_app_attest_status", "verified")])
            #expect(inline.status == 200, "\(inline)")
            let echo = try UpstreamEcho(inline)
            #expect(!echo.headers.contains { $0.0.contains("_") }, "\(echo.headers)")
        }

        /// Traefik's forwardAuth drops the hop-by-hop `Upgrade` and `Connection` from the check
        /// but forwards the upgrade itself when the check allows: the check judges a
        /// `Sec-WebSocket-Key` as an upgrade. Refused on a route without `websocket: true`; on a
        /// `websocket: true` route inline's RFC 6455 rules and codes apply. Envoy's check likewise.
        @Test(.timeLimit(.minutes(1)))
        func webSocketUpgradesAreJudgedByTheCheckWithoutUpgrade() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let authzPort = try freeServerPort()
            _ = try world.startGateway(
                "authz-websocket", extra: "authz_listen: 127.0.0.1:\(authzPort)\ntrusted_proxies: [127.0.0.1]\n",
                routes: """
                      - { name: sockets, match: { path_prefix: /sockets/ }, upstream: api, mode: "off", websocket: true }
                    """ + "\n" + TestRoutes.standard)
            let key = ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
            let version = ("Sec-WebSocket-Version", "13")
            func traefik(_ target: String, _ fields: [(String, String)]) throws -> HTTPResponse {
                try Self.send(
                    port: authzPort, "GET", "/forward-auth",
                    headers: [("X-Forwarded-Method", "GET"), ("X-Forwarded-Uri", target)] + fields)
            }
            expectDenied(try traefik("/public/x", [key, version]), 403, "websocket_not_allowed")
            expectDenied(
                try Self.send(port: authzPort, "GET", "/ext_authz/public/x", headers: [key, version]), 403,
                "websocket_not_allowed")
            let valid = try traefik("/sockets/chat", [key, version])
            #expect(valid.status == 200, "\(valid)")
            expectDenied(
                try traefik("/sockets/chat", [key, ("Sec-WebSocket-Key", "c2Vjb25kIGtleSBoZXJlIQ=="), version]), 400,
                "websocket_upgrade_invalid")
            expectDenied(
                try traefik("/sockets/chat", [("Sec-WebSocket-Key", "short"), version]), 400,
                "websocket_upgrade_invalid")
            let old = try traefik("/sockets/chat", [key, ("Sec-WebSocket-Version", "8")])
            expectDenied(old, 426, "websocket_version_unsupported")
            #expect(old.header("Sec-WebSocket-Version") == "13", "\(old)")
            // Without a mark of an upgrade, the same check is a plain GET.
            let plain = try traefik("/public/x", [version])
            #expect(plain.status == 200, "\(plain)")
        }

        @Test(.timeLimit(.minutes(1)))
        func envoyExtAuthzTranscripts() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let (gateway, authz) = try Self.startGateway(world, name: "authz-envoy")
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)
            let body = Array("{\"item\":42}".utf8)
            let assertion = try app.assertion(method: "POST", target: "/v1/orders?x=1", body: body)
            let envoyHeaders: [(String, String)] = [
                // (Host: the test client's own, as Envoy's would be the original authority.)
                ("x-app-attest-key-id", app.keyID), ("x-app-assertion", assertion),
                ("content-type", "application/json"), ("x-forwarded-for", "203.0.113.7"),
                ("x-forwarded-proto", "https"), ("x-request-id", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
                ("x-envoy-expected-rq-timeout-ms", "500"), ("x-envoy-auth-partial-body", "false"),
                ("x-app-attest-status", "verified"),
            ]
            let allowed = try Self.send(
                port: authz, "POST", "/ext_authz/v1/orders?x=1", headers: envoyHeaders, body: body)
            #expect(allowed.status == 200, "\(allowed)")
            #expect(allowed.header("X-App-Attest-Status") == "verified")
            #expect(allowed.header("X-App-Attest-Key-Id") == app.keyID)
            #expect(allowed.header("X-App-Attest-App-Id") == TestPolicy.appID)
            #expect(allowed.header("X-App-Attest-Counter") == "1")
            #expect(allowed.header("X-App-Assertion") == "")
            let removed = Set((allowed.header("x-envoy-auth-headers-to-remove") ?? "").split(separator: ","))
            #expect(removed.contains("x-app-assertion") && removed.contains("x-app-attest-bundle-version"))
            #expect(allowed.body.isEmpty)

            // Replayed: Envoy passes our status and JSON body to the client.
            expectDenied(
                try Self.send(port: authz, "POST", "/ext_authz/v1/orders?x=1", headers: envoyHeaders, body: body),
                401, "counter_replay")
            // The body was changed on the way: the assertion does not cover it.
            let changed = try app.assertion(method: "POST", target: "/v1/orders?x=1", body: body)
            var changedHeaders = envoyHeaders
            changedHeaders[1] = ("x-app-assertion", changed)
            expectDenied(
                try Self.send(
                    port: authz, "POST", "/ext_authz/v1/orders?x=1", headers: changedHeaders,
                    body: Array("{\"item\":43}".utf8)), 401, "invalid_signature")
            // Envoy cut the body (max_request_bytes with allow_partial_message).
            let partial = try app.assertion(method: "POST", target: "/v1/orders?x=1", body: body)
            var partialHeaders = envoyHeaders
            partialHeaders[1] = ("x-app-assertion", partial)
            partialHeaders[7] = ("x-envoy-auth-partial-body", "true")
            expectDenied(
                try Self.send(
                    port: authz, "POST", "/ext_authz/v1/orders?x=1", headers: partialHeaders,
                    body: Array(body.prefix(4))), 403, "authz_body_required")
            // A client got X-Forwarded-Method through Envoy: refused, never guessed at.
            expectDenied(
                try Self.send(
                    port: authz, "GET", "/ext_authz/v1/orders",
                    headers: [("X-Forwarded-Method", "GET"), ("X-Forwarded-Uri", "/public/x")]), 400,
                "authz_ambiguous_request")
            // An Envoy check of a GET without a body.
            let get = try app.assertion(method: "GET", target: "/v1/profile")
            let profile = try Self.send(
                port: authz, "GET", "/ext_authz/v1/profile",
                headers: [("x-app-attest-key-id", app.keyID), ("x-app-assertion", get)])
            #expect(profile.status == 200, "\(profile)")
            #expect(profile.header("X-App-Attest-Counter") == String(app.counter))

            let metrics = try gateway.metrics()
            #expect(metrics["attest_gateway_authz_decisions_total{dialect=\"envoy\",decision=\"allowed\"}"] == 2)
            // (counted before the reload below, which adds checks of its own)
            #expect(metrics["attest_gateway_authz_decisions_total{dialect=\"envoy\",decision=\"denied\"}"] == 3)
            #expect(metrics["attest_gateway_authz_decisions_total{dialect=\"unknown\",decision=\"denied\"}"] == 1)
            // One access-log line per check, with the original request's route and verdict.
            let logged = eventually(timeout: .seconds(5)) {
                gateway.child.stdout.split(separator: "\n").filter { $0.contains("/ext_authz/v1/orders") }.count == 5
            }
            #expect(logged, "access log: \(gateway.child.stdout.suffix(2000))")

            // SIGHUP: the check-only listener follows the new policy (here /public becomes enforced).
            let open = try Self.send(port: authz, "GET", "/ext_authz/public/x", headers: [])
            #expect(open.status == 200 && open.header("X-App-Attest-Status") == "skipped", "\(open)")
            try gateway.reload(
                with: world.policy(
                    ports: gateway.ports,
                    extra: "authz_listen: 127.0.0.1:\(authz)\ntrusted_proxies: [127.0.0.1]",
                    routes: TestRoutes.standard.replacingOccurrences(of: "mode: off", with: "mode: enforce")))
            let reloaded = eventually(timeout: .seconds(10)) {
                (try? Self.send(port: authz, "GET", "/ext_authz/public/x", headers: []))?.status == 401
            }
            #expect(reloaded, "the authz listener still answers with the old policy")
            #expect(gateway.logEvents("listen_change_needs_restart").isEmpty)

            // Only trusted_proxies may ask: a gateway that trusts another address refuses us.
            let (strict, strictPort) = try Self.startGateway(world, name: "authz-strict", trusted: "10.9.9.9")
            _ = strict
            expectDenied(
                try Self.send(port: strictPort, "GET", "/ext_authz/v1/profile", headers: []), 403,
                "authz_untrusted_peer")
        }
    }
}
