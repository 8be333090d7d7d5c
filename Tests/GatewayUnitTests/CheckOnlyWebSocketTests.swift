import GatewayTesting
import Simulator
import Testing

@testable import Enforcement
@testable import GateContract
@testable import HTTP1
@testable import HTTPProxy
@testable import KeyStore
@testable import PolicyModel

/// WebSocket upgrades through the check-only doors. Traefik's `forwardAuth` (and nginx's
/// `auth_request`) drop `Upgrade` and `Connection` from the check, yet Traefik forwards the
/// upgrade itself when the check allows: the check must judge the upgrade, not the plain GET it
/// sees. Each door (a forward-auth check as Traefik sends it, as Caddy sends it with `Upgrade`,
/// and an Envoy check) is compared with the inline verdict (`WebSocketUpgrade`, HTTPProxy).
@Suite struct CheckOnlyWebSocketTests {
    static let key = "dGhlIHNhbXBsZSBub25jZQ=="

    static let routes: [RoutePolicy] = {
        var socket = RoutePolicy(
            name: "ws", match: .init(pathPrefix: "/ws/"), upstream: "api", mode: .off)
        socket.websocket = true
        var protectedSocket = RoutePolicy(
            name: "wsapi", match: .init(pathPrefix: "/v1/ws/"), upstream: "api", mode: .enforce)
        protectedSocket.websocket = true
        return [
            socket, protectedSocket,
            RoutePolicy(name: "api", match: .init(pathPrefix: "/v1/"), upstream: "api", mode: .enforce),
            RoutePolicy(name: "open", match: .init(pathPrefix: "/"), upstream: "api", mode: .off),
        ]
    }()

    static let handshake = [
        ("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Key", key),
    ]

    /// `fields` with `name` replaced by `value` (removed for nil), or with it added twice.
    static func replacing(_ name: String, with value: String?) -> [(String, String)] {
        var fields = Self.handshake.filter { $0.0 != name }
        if let value { fields.append((name, value)) }
        return fields
    }

    /// What Traefik's forwardAuth leaves of the client's fields: no hop-by-hop ones.
    static func traefik(_ head: HTTPRequestHead) -> HTTPRequestHead {
        var stripped = head
        stripped.headers.remove(name: "Connection")
        stripped.headers.remove(name: "Upgrade")
        return AuthzGateTests.forwardAuth(stripped)
    }

    /// The verdict of each check door, as the code the answer carries (or "allowed").
    static func checks(_ head: HTTPRequestHead, body: [UInt8]? = nil) async throws -> [String: String] {
        let gate = AuthzGate(inner: try EveryDoorTests.gate(routes: Self.routes), pathPrefix: "/ext_authz")
        var envoy = EveryDoorTests.envoyCheck(head)
        envoy.headers.add(name: "Content-Length", value: String(body?.count ?? 0))
        var verdicts: [String: String] = [:]
        for (door, check, checkBody) in [
            ("traefik", Self.traefik(head), nil), ("caddy", AuthzGateTests.forwardAuth(head), nil),
            ("envoy", envoy, body ?? []),
        ] {
            let answer = try #require(await runGate(gate, check, body: checkBody).1.localResponse)
            verdicts[door] = answer.status == 200 ? "allowed" : answer.headers["X-App-Attest-Error"] ?? "?"
        }
        return verdicts
    }

    /// The inline proxy's verdict on the upgrade (before the gate's, which these heads pass).
    static func inline(_ head: HTTPRequestHead, framing: RequestBodyFraming = .none) -> String {
        switch WebSocketUpgrade.request(head, framing: framing) {
        case .none, .websocket: "allowed"
        case .invalid(let error): error.code.rawValue
        }
    }

    @Test func aValidUpgradeOnAWebSocketRouteIsAllowedByEveryCheck() async throws {
        let head = request("GET", "/ws/chat", headers: Self.handshake)
        #expect(Self.inline(head) == "allowed")
        #expect(try await Self.checks(head) == ["traefik": "allowed", "caddy": "allowed", "envoy": "allowed"])
    }

    @Test(arguments: [
        Self.handshake + [("Sec-WebSocket-Key", "c2Vjb25kIGtleSBoZXJlIQ==")],
        Self.replacing("Sec-WebSocket-Key", with: "short"),
        Self.replacing("Sec-WebSocket-Key", with: nil),
        Self.replacing("Sec-WebSocket-Version", with: "8"),
        Self.replacing("Sec-WebSocket-Version", with: nil),
        Self.handshake + [("Sec-WebSocket-Version", "13")],
    ])
    func anInvalidUpgradeOnAWebSocketRouteGetsInlinesCodeFromEveryCheck(fields: [(String, String)]) async throws {
        let head = request("GET", "/ws/chat", headers: fields)
        let code = Self.inline(head)
        #expect(code == "websocket_upgrade_invalid" || code == "websocket_version_unsupported")
        // Traefik drops Upgrade: the key alone marks the check as an upgrade. Without a key,
        // Traefik's check is a plain GET (and so is what it forwards: no key, no WebSocket).
        let hasKey = fields.contains { $0.0 == "Sec-WebSocket-Key" }
        #expect(
            try await Self.checks(head) == ["traefik": hasKey ? code : "allowed", "caddy": code, "envoy": code])
    }

    @Test func anUpgradeWithABodyOrAnotherMethodIsInvalidOnEveryCheck() async throws {
        let post = request("POST", "/ws/chat", headers: Self.handshake)
        #expect(Self.inline(post) == "websocket_upgrade_invalid")
        #expect(
            try await Self.checks(post, body: Array("x".utf8)) == [
                "traefik": "websocket_upgrade_invalid", "caddy": "websocket_upgrade_invalid",
                "envoy": "websocket_upgrade_invalid",
            ])
        // Envoy's check carries the body: a GET with one is refused as inline refuses it.
        let get = request("GET", "/ws/chat", headers: Self.handshake)
        #expect(Self.inline(get, framing: .contentLength(1)) == "websocket_upgrade_invalid")
        #expect(try await Self.checks(get, body: Array("x".utf8))["envoy"] == "websocket_upgrade_invalid")
    }

    @Test func aVersionRefusalNamesTheVersionTheGatewaySpeaks() async throws {
        let gate = AuthzGate(inner: try EveryDoorTests.gate(routes: Self.routes), pathPrefix: "/ext_authz")
        let head = request("GET", "/ws/chat", headers: Self.replacing("Sec-WebSocket-Version", with: "8"))
        let answer = try #require(await runGate(gate, Self.traefik(head)).1.localResponse)
        #expect(answer.status == 426)
        #expect(answer.headers["Sec-WebSocket-Version"] == "13")
        #expect(answer.headers["X-App-Attest-Error"] == "websocket_version_unsupported")
    }

    @Test func anUpgradeOnARouteWithoutWebSocketsIsRefusedByEveryCheck() async throws {
        // Inline serves it as plain HTTP with Upgrade removed; a check cannot remove the upgrade
        // from what its front forwards, so it refuses.
        let head = request("GET", "/public/x", headers: Self.handshake)
        #expect(
            try await Self.checks(head) == [
                "traefik": "websocket_not_allowed", "caddy": "websocket_not_allowed", "envoy": "websocket_not_allowed",
            ])
        // `Upgrade: websocket` alone (a front that passes it but no key) is a mark too.
        let upgradeOnly = request("GET", "/public/x", headers: [("Upgrade", "websocket")])
        #expect(try await Self.checks(upgradeOnly)["caddy"] == "websocket_not_allowed")
        // The inline gate's own refusals at classification (credentials absent) come first, as inline.
        #expect(
            try await Self.checks(request("GET", "/v1/x", headers: Self.handshake)) == [
                "traefik": "assertion_missing", "caddy": "assertion_missing", "envoy": "assertion_missing",
            ])
    }

    @Test func anUpgradeWithAValidAssertionOnARouteWithoutWebSocketsIsRefused() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let gate = AuthzGate(inner: h.gate, pathPrefix: "/ext_authz")
        let head = try EnforcementHarness.signed(
            device, counter: 1, method: "GET", target: "/v1/items", extraHeaders: Self.handshake)
        let answer = try #require(await runGate(gate, Self.traefik(head)).1.localResponse)
        #expect(answer.status == 403)
        #expect(answer.headers["X-App-Attest-Error"] == "websocket_not_allowed")
        // The same signed request without the upgrade's marks is verified (a fresh counter).
        let plain = try EnforcementHarness.signed(device, counter: 2, method: "GET", target: "/v1/items")
        let allowed = try #require(await runGate(gate, Self.traefik(plain)).1.localResponse)
        #expect(allowed.status == 200)
    }

    @Test func aRequestWithoutAnUpgradeMarkIsJudgedAsBefore() async throws {
        // Sec-WebSocket-Version alone, or Upgrade naming another protocol, asks for nothing.
        for fields in [[("Sec-WebSocket-Version", "13")], [("Upgrade", "h2c"), ("Connection", "Upgrade")]] {
            #expect(
                try await Self.checks(request("GET", "/public/x", headers: fields)) == [
                    "traefik": "allowed", "caddy": "allowed", "envoy": "allowed",
                ])
        }
        #expect(try await Self.checks(request("GET", "/v1/x"))["traefik"] == "assertion_missing")
    }

    @Test func anUpgradeOnAProtectedWebSocketRouteStillNeedsItsAssertion() async throws {
        let head = request("GET", "/v1/ws/chat", headers: Self.handshake)
        #expect(
            try await Self.checks(head) == [
                "traefik": "assertion_missing", "caddy": "assertion_missing", "envoy": "assertion_missing",
            ])
    }

    @Test func theOpeningRulesReadEachMark() {
        let traefik = WebSocketOpening(HTTPHeaders([("Sec-WebSocket-Key", Self.key), ("Sec-WebSocket-Version", "13")]))
        #expect(traefik.hasUpgradeMark && !traefik.asksUpgrade)
        #expect(traefik.verdict(method: "GET", versionMinor: nil, hasBody: false) == .valid(key: Self.key))
        let full = WebSocketOpening(HTTPHeaders(Self.handshake))
        #expect(full.hasUpgradeMark && full.asksUpgrade)
        #expect(
            full.verdict(method: "GET", versionMinor: 0, hasBody: false)
                == .refused(.invalid("a WebSocket upgrade needs HTTP/1.1")))
        let none = WebSocketOpening(HTTPHeaders([("Upgrade", "websocket/13"), ("Sec-WebSocket-Version", "13")]))
        #expect(!none.hasUpgradeMark)
    }

    @Test func anEnvoyCheckDeclaresABodyOnlyWithALengthOrChunks() {
        #expect(!AuthzGate.hasBody(HTTPRequestHead(method: "GET", target: "/", headers: HTTPHeaders())))
        #expect(
            !AuthzGate.hasBody(
                HTTPRequestHead(method: "GET", target: "/", headers: HTTPHeaders([("content-length", "0")]))))
        #expect(
            AuthzGate.hasBody(
                HTTPRequestHead(method: "GET", target: "/", headers: HTTPHeaders([("content-length", "3")]))))
        #expect(
            AuthzGate.hasBody(
                HTTPRequestHead(method: "GET", target: "/", headers: HTTPHeaders([("Transfer-Encoding", "chunked")]))))
    }
}
