package import GateContract
import GatewayIO
package import HTTP1
package import PolicyModel
import Verification

/// `GET <endpoints.policy>` (default `/app-attest/policy`): the route discovery document,
/// so that an app never hard-codes which of its requests need an assertion, a challenge or
/// which binding (docs/protocol.md, "Route discovery"; the client package reads it).
///
/// - Unauthenticated and identical for every client: it describes what the policy enforces,
///   never how it is served. Nothing secret and nothing an attacker gains from: no upstream
///   names or addresses, no `on_store_error`, no trust roots, no Redis, no limits beyond the
///   route's own body cap (which a client hits anyway).
/// - Cacheable: a strong `ETag` (SHA-256 of the body) and `Cache-Control: public, max-age=300`;
///   `If-None-Match` with the current tag gets `304`. A policy reload builds a new document
///   (the gate is rebuilt), so clients see a change within `max-age`.
/// - `GET` and `HEAD` only (405 otherwise).
///
/// ## Schema, `version: 1`
/// ```json
/// {"version": 1,
///  "endpoints": {"challenge": "/app-attest/challenge", "attest": "/app-attest/attest",
///                "report": "/app-attest/report",
///                "policy": "/app-attest/policy", "devicecheck": "/app-attest/devicecheck"},
///  "app_ids": ["ABCDE12345.com.example.app"],   // public anyway (in every copy of the app)
///  "environment": "production",            // production | development | any
///  "challenge_ttl_seconds": 300,
///  "routes": [                              // policy order; the first match wins
///    {"match": {"path": null, "path_prefix": "/v1/premium", "methods": ["GET", "HEAD", "POST"]},
///     "mode": "enforce",                    // enforce | monitor | off
///     "challenge": "required",              // required | none
///     "binding": "request",                 // request | body | head
///     "challenge_field": "challenge",       // the JSON field (binding body + challenge required)
///     "max_body_bytes": 1048576,
///     "counter_window": 0,                  // 0 = strictly increasing counters
///     "allow_debug_tokens": false,
///     "device_check_fallback": false}]}   // true: X-App-Attest-Token accepted (fallback: devicecheck)
/// ```
/// `methods` is null when every method matches; a route listing GET lists HEAD too (the
/// gateway applies a GET route to HEAD). Readers ignore fields they do not know; a change a
/// version-1 reader would misread gets a new `version`.
package struct PolicyDocumentEndpoint: Sendable {
    /// The `version` field of the document.
    package static let schemaVersion = 1
    /// `Cache-Control: max-age` of the document, in seconds.
    package static let maxAgeSeconds = 300

    /// What a route offers the app beyond the route's mode, challenge and binding. These are
    /// the route's own fields (`counter_window`, `allow_debug_tokens`, `fallback`).
    package struct RouteFeatures: Sendable, Hashable {
        /// Out-of-order counters accepted within this many below the highest (0: strictly increasing).
        package var counterWindow: Int
        package var allowsDebugTokens: Bool
        package var allowsDeviceCheckFallback: Bool
    }

    package static func features(of route: RoutePolicy) -> RouteFeatures {
        RouteFeatures(
            counterWindow: route.counterWindow,
            allowsDebugTokens: route.allowDebugTokens,
            allowsDeviceCheckFallback: route.fallback == .deviceCheck && route.mode != .off
        )
    }

    /// The document's JSON text.
    package let body: [UInt8]
    /// The strong entity tag, quotes included.
    package let etag: String

    package init(policy: GatewayPolicy) {
        let text = Self.document(policy)
        self.body = Array(text.utf8)
        let digest = SHA256.hash(self.body)
        self.etag = "\"" + Self.hex(digest.prefix(16)) + "\""
    }

    /// The answer to `head` (any method; HEAD's body is dropped by the connection).
    package func response(to head: HTTPRequestHead) -> LocalResponse {
        guard head.method == "GET" || head.method == "HEAD" else {
            var response = LocalResponse.jsonError(
                status: 405,
                code: EnforcementError.Code.methodNotAllowed.rawValue,
                message: "the policy document accepts GET and HEAD only"
            )
            response.headers.add(name: "Allow", value: "GET, HEAD")
            return response
        }
        var headers = HTTPHeaders()
        headers.add(name: "ETag", value: self.etag)
        headers.add(name: "Cache-Control", value: "public, max-age=\(Self.maxAgeSeconds)")
        if let condition = head.headers["If-None-Match"], Self.matches(condition, etag: self.etag) {
            // 304: no content; the serializer sends the 200's Content-Length and no body.
            return LocalResponse(status: 304, headers: headers, body: self.body)
        }
        headers.add(name: "Content-Type", value: "application/json")
        return LocalResponse(status: 200, headers: headers, body: self.body)
    }

    /// `If-None-Match` (RFC 9110 13.1.2): `*` or a list of tags compared weakly.
    static func matches(_ condition: String, etag: String) -> Bool {
        for candidate in condition.split(separator: ",") {
            var tag = candidate.trimmingSpaces
            if tag == "*" { return true }
            if tag.hasPrefix("W/") { tag = tag.dropFirst(2) }
            if tag == etag[...] { return true }
        }
        return false
    }

    static func document(_ policy: GatewayPolicy) -> String {
        let endpoints = JSONText.object(
            [
                ("challenge", JSONText.quote(policy.endpoints.challenge)),
                ("attest", JSONText.quote(policy.endpoints.attest)),
                ("report", JSONText.quote(policy.endpoints.report)),
                ("policy", JSONText.quote(policy.endpoints.policy)),
                ("devicecheck", JSONText.quote(policy.endpoints.deviceCheck)),
            ] + (policy.tokens == nil ? [] : [("token", JSONText.quote(policy.endpoints.token))]))
        let routes = policy.routes.map { route -> String in
            let features = Self.features(of: route)
            let methods = RouteTable.effectiveMethods(route.match.methods).map { list in
                "[" + list.map { JSONText.quote($0) }.joined(separator: ",") + "]"
            }
            let match = JSONText.object([
                ("path", route.match.path.map { JSONText.quote($0) } ?? "null"),
                ("path_prefix", route.match.pathPrefix.map { JSONText.quote($0) } ?? "null"),
                ("methods", methods ?? "null"),
                ("case_sensitive", route.caseSensitive ? "true" : "false"),
            ])
            return JSONText.object([
                ("match", match),
                ("mode", JSONText.quote(route.mode.rawValue)),
                ("challenge", JSONText.quote(route.challenge.rawValue)),
                ("binding", JSONText.quote(route.binding.rawValue)),
                ("challenge_field", JSONText.quote(route.challengeField)),
                ("max_body_bytes", String(route.maxBodyBytes)),
                ("counter_window", String(features.counterWindow)),
                ("allow_debug_tokens", features.allowsDebugTokens ? "true" : "false"),
                ("device_check_fallback", features.allowsDeviceCheckFallback ? "true" : "false"),
                // `Authorization: Bearer` with a token of this audience replaces the assertion.
                ("accept_token", Self.acceptToken(route.acceptToken)),
            ])
        }
        return JSONText.object([
            ("version", String(Self.schemaVersion)),
            ("endpoints", endpoints),
            ("app_ids", "[" + policy.appIDs.map { JSONText.quote($0) }.joined(separator: ",") + "]"),
            ("environment", JSONText.quote(policy.environment.rawValue)),
            ("challenge_ttl_seconds", String(policy.challengeTTLSeconds)),
            ("routes", "[" + routes.joined(separator: ",") + "]"),
        ])
    }

    private static func acceptToken(_ acceptance: TokenAcceptance?) -> String {
        guard let acceptance else { return "null" }
        return JSONText.object([
            ("audience", JSONText.quote(acceptance.audience)),
            ("limited_use", acceptance.limitedUse ? "true" : "false"),
        ])
    }

    private static func hex(_ bytes: ArraySlice<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return text
    }
}
