import GatewayIO
package import HTTP1

/// RFC 6455 §4.1's rules on a client's opening handshake, pure (no I/O), read once from a
/// request's fields: the one place both doors judge an upgrade by.
///
/// - Inline (`WebSocketUpgrade`, HTTPProxy): a request asks for a WebSocket when `Connection`
///   names `upgrade` and `Upgrade` names `websocket` (`asksUpgrade`).
/// - Check-only (`AuthzGate`, Enforcement): Traefik's `forwardAuth` and nginx's `auth_request`
///   drop the hop-by-hop `Upgrade` and `Connection` from the check, so any mark that survives
///   (`Sec-WebSocket-Key`, or an `Upgrade: websocket` a front passed) makes it an upgrade attempt
///   (`hasUpgradeMark`).
///
/// Either way the same `verdict` applies: a GET (of HTTP/1.1, where the door knows the client's
/// version), no body, `Sec-WebSocket-Version: 13` once, one `Sec-WebSocket-Key` that is the
/// canonical base64 of 16 bytes.
package struct WebSocketOpening: Sendable, Hashable {
    /// Why an opening handshake breaks RFC 6455 §4.1; each door turns it into its own error
    /// type with the same code.
    package enum Refusal: Sendable, Hashable {
        /// `websocket_upgrade_invalid` (400): not a GET, not HTTP/1.1, a body, or a missing,
        /// repeated or malformed `Sec-WebSocket-Key`.
        case invalid(String)
        /// `websocket_version_unsupported` (426, answered with `Sec-WebSocket-Version: 13`).
        case versionUnsupported(String)

        package var message: String {
            switch self {
            case .invalid(let message), .versionUnsupported(let message): message
            }
        }
    }

    /// The only version RFC 6455 defines.
    package static let version = "13"

    /// `Connection` names `upgrade` (RFC 9110 §7.6.1 list, any case).
    package private(set) var connectionNamesUpgrade = false
    /// `Upgrade` names `websocket` (`websocket/13` does not count).
    package private(set) var upgradeNamesWebSocket = false
    /// Every `Sec-WebSocket-Key` value, in order.
    package private(set) var keys: [String] = []
    /// Every `Sec-WebSocket-Version` value, in order.
    package private(set) var versions: [String] = []

    /// Reads the fields that matter from `headers` (one pass).
    package init(_ headers: HTTPHeaders) {
        for field in headers {
            if field.name.equalsLowercaseASCII("connection") {
                if Self.listContains(field.value, "upgrade") { self.connectionNamesUpgrade = true }
            } else if field.name.equalsLowercaseASCII("upgrade") {
                if Self.listContains(field.value, "websocket") { self.upgradeNamesWebSocket = true }
            } else if field.name.equalsLowercaseASCII("sec-websocket-key") {
                self.keys.append(field.value)
            } else if field.name.equalsLowercaseASCII("sec-websocket-version") {
                self.versions.append(field.value)
            }
        }
    }

    /// The request asks for a WebSocket as a client speaks to the gateway directly.
    package var asksUpgrade: Bool { self.connectionNamesUpgrade && self.upgradeNamesWebSocket }

    /// The request carries a mark of an upgrade that a front which drops hop-by-hop fields
    /// still passes: a `Sec-WebSocket-Key` or `Upgrade: websocket`.
    package var hasUpgradeMark: Bool { self.upgradeNamesWebSocket || !self.keys.isEmpty }

    /// The judgement of a handshake.
    package enum Verdict: Sendable, Hashable {
        /// Valid, with its one `Sec-WebSocket-Key`.
        case valid(key: String)
        case refused(Refusal)
    }

    /// Judges this handshake. `versionMinor` is the client's HTTP/1.x minor version, nil where
    /// the door does not know it (a check's own version is its front's, not the client's);
    /// `hasBody` whether the request has a body.
    package func verdict(method: String, versionMinor: Int?, hasBody: Bool) -> Verdict {
        guard method == "GET" else { return .refused(.invalid("a WebSocket upgrade must be a GET")) }
        if let versionMinor, versionMinor < 1 { return .refused(.invalid("a WebSocket upgrade needs HTTP/1.1")) }
        // A body would sit between the handshake and the first frame: neither protocol's.
        guard !hasBody else {
            return .refused(.invalid("a WebSocket upgrade carries no body (no Content-Length, no Transfer-Encoding)"))
        }
        guard self.versions == [Self.version] else {
            return .refused(.versionUnsupported("Sec-WebSocket-Version must be 13, given once"))
        }
        guard self.keys.count == 1, let key = self.keys.first, Self.isValidKey(key) else {
            return .refused(.invalid("Sec-WebSocket-Key must be given once, the base64 of 16 bytes"))
        }
        return .valid(key: key)
    }

    /// RFC 6455 §4.1: the base64 (canonical, padded) of 16 bytes.
    package static func isValidKey(_ key: String) -> Bool {
        guard key.utf8.count == 24 else { return false }
        var key = key
        let decoded = key.withUTF8 { Base64Text.decode($0) }
        guard case .bytes(let bytes) = decoded, bytes.count == 16 else { return false }
        return Base64Text.encode(bytes) == key
    }

    /// A comma-separated list (RFC 9110 §5.6.1) has `token`, ASCII case-insensitively; a
    /// protocol's `/version` (`websocket/13`) does not count as `websocket`.
    package static func listContains(_ value: String, _ token: StaticString) -> Bool {
        for element in value.utf8.split(separator: HTTPByte.comma) {
            var lower = element.startIndex
            var upper = element.endIndex
            while lower < upper, HTTPByte.isWhitespace(element[lower]) { lower = element.index(after: lower) }
            while upper > lower, HTTPByte.isWhitespace(element[element.index(before: upper)]) {
                upper = element.index(before: upper)
            }
            guard let text = String(element[lower..<upper]) else { continue }
            if text.utf8.count == token.utf8CodeUnitCount && text.equalsLowercaseASCII(token) { return true }
        }
        return false
    }
}
