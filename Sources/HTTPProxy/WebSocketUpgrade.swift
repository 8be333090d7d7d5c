import GatewayIO
package import HTTP1
import Verification

/// RFC 6455 §4 as a proxy needs it, pure (no I/O): which requests ask for a WebSocket and
/// whether they ask correctly, whether the upstream's 101 answers the request it was sent, and
/// the 101 head the client receives.
///
/// The gateway tunnels only after a 101 that carries the `Sec-WebSocket-Accept` derived from the
/// key this client sent: an upstream that switched for some other reason (or a 101 meant for
/// another request) is a 502, so a tunnel never starts where the client did not ask for one.
package enum WebSocketUpgrade {
    /// RFC 6455 §1.3: appended to the key before hashing.
    static let acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
    /// The only version RFC 6455 defines.
    static let version = "13"

    /// What a request head asks for.
    package enum Request: Sendable, Hashable {
        /// No `Upgrade: websocket` named by `Connection: upgrade`: plain HTTP.
        case none
        /// A valid opening handshake with this `Sec-WebSocket-Key`.
        case websocket(key: String)
        /// Asks for a WebSocket but breaks RFC 6455 §4.1 (refused, never forwarded).
        case invalid(ProxyError)
    }

    /// Reads the head of a request whose body framing is `framing`.
    package static func request(_ head: HTTPRequestHead, framing: RequestBodyFraming) -> Request {
        var connectionNamesUpgrade = false
        var upgradeNamesWebSocket = false
        var keys: [String] = []
        var versions: [String] = []
        for field in head.headers {
            if field.name.equalsLowercaseASCII("connection") {
                if Self.listContains(field.value, "upgrade") { connectionNamesUpgrade = true }
            } else if field.name.equalsLowercaseASCII("upgrade") {
                if Self.listContains(field.value, "websocket") { upgradeNamesWebSocket = true }
            } else if field.name.equalsLowercaseASCII("sec-websocket-key") {
                keys.append(field.value)
            } else if field.name.equalsLowercaseASCII("sec-websocket-version") {
                versions.append(field.value)
            }
        }
        guard connectionNamesUpgrade && upgradeNamesWebSocket else { return .none }
        guard head.method == "GET" else {
            return .invalid(ProxyError(.websocketUpgradeInvalid, "a WebSocket upgrade must be a GET"))
        }
        guard head.versionMinor >= 1 else {
            return .invalid(ProxyError(.websocketUpgradeInvalid, "a WebSocket upgrade needs HTTP/1.1"))
        }
        // A body would sit between the handshake and the first frame: neither protocol's.
        guard framing == .none else {
            return .invalid(
                ProxyError(
                    .websocketUpgradeInvalid,
                    "a WebSocket upgrade carries no body (no Content-Length, no Transfer-Encoding)"))
        }
        guard versions == [Self.version] else {
            return .invalid(
                ProxyError(.websocketVersionUnsupported, "Sec-WebSocket-Version must be 13, given once"))
        }
        guard keys.count == 1, let key = keys.first, Self.isValidKey(key) else {
            return .invalid(
                ProxyError(
                    .websocketUpgradeInvalid, "Sec-WebSocket-Key must be given once, the base64 of 16 bytes"))
        }
        return .websocket(key: key)
    }

    /// RFC 6455 §4.1: the base64 (canonical, padded) of 16 bytes.
    static func isValidKey(_ key: String) -> Bool {
        guard key.utf8.count == 24 else { return false }
        var key = key
        let decoded = key.withUTF8 { Base64Text.decode($0) }
        guard case .bytes(let bytes) = decoded, bytes.count == 16 else { return false }
        return Base64Text.encode(bytes) == key
    }

    /// `Sec-WebSocket-Accept` for `key`: base64(SHA-1(key + GUID)) (RFC 6455 §4.2.2).
    package static func acceptValue(forKey key: String) -> String {
        Base64Text.encode(Insecure.SHA1.hash(Array((key + Self.acceptGUID).utf8)))
    }

    /// Why the upstream's 101 does not complete the handshake for `key`; nil when it does:
    /// `Upgrade: websocket`, `Connection: upgrade` and exactly one `Sec-WebSocket-Accept`
    /// equal to `acceptValue(forKey: key)` (RFC 6455 §4.1, the client's checks).
    static func mismatch(in head: HTTPRawResponseHead, buffer: UnsafeRawBufferPointer, key: String) -> String? {
        var upgrade = false
        var connection = false
        var accepts: [String] = []
        for field in head.fields {
            let value = String(decoding: UnsafeRawBufferPointer(rebasing: buffer[field.value]), as: UTF8.self)
            if buffer.equalsLowercaseToken(field.name, "upgrade") {
                if Self.listContains(value, "websocket") { upgrade = true }
            } else if buffer.equalsLowercaseToken(field.name, "connection") {
                if Self.listContains(value, "upgrade") { connection = true }
            } else if buffer.equalsLowercaseToken(field.name, "sec-websocket-accept") {
                accepts.append(value)
            }
        }
        guard upgrade else { return "the 101 has no Upgrade: websocket" }
        guard connection else { return "the 101 has no Connection: upgrade" }
        guard accepts == [Self.acceptValue(forKey: key)] else {
            return "the 101's Sec-WebSocket-Accept does not answer the request's key"
        }
        return nil
    }

    /// Writes the 101 the client receives: the upstream's fields without hop-by-hop and framing
    /// fields (as every response), then `Upgrade: websocket`, `Connection: Upgrade` (hop-by-hop,
    /// so this hop writes its own) and the exchange's `X-Request-Id`.
    static func writeClientHead(
        _ head: HTTPRawResponseHead, in buffer: UnsafeRawBufferPointer, requestID: RequestID, into output: IOBuffer
    ) {
        var fieldBytes = 0
        for field in head.fields { fieldBytes += field.name.count + field.value.count + 4 }
        let bound = HeadWriter.statusLineBound(reasonCount: head.reason.count) + fieldBytes + requestID.utf8Count + 64
        output.reserveWritable(bound)
        var writer = HeadWriter(UnsafeMutableRawBufferPointer(start: output.writablePointer, count: bound))
        writer.writeStatusLine(101, reason: UnsafeRawBufferPointer(rebasing: buffer[head.reason]))
        let options = HeaderRewriting.ConnectionOptions(head.fields, in: buffer)
        for field in head.fields {
            if HeaderRewriting.isHopByHop(buffer, field.name) || options.names(buffer, field.name) { continue }
            if field.name.count == 12 && buffer.equalsLowercaseToken(field.name, "x-request-id") { continue }
            writer.writeField(
                UnsafeRawBufferPointer(rebasing: buffer[field.name]),
                UnsafeRawBufferPointer(rebasing: buffer[field.value]))
        }
        writer.write("Upgrade: websocket\r\nConnection: Upgrade\r\nX-Request-Id: ")
        requestID.write(into: &writer)
        writer.write("\r\n\r\n")
        output.didWrite(writer.count)
    }

    /// A comma-separated list (RFC 9110 §5.6.1) has `token`, ASCII case-insensitively; a
    /// protocol's `/version` (`websocket/13`) does not count as `websocket`.
    static func listContains(_ value: String, _ token: StaticString) -> Bool {
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
