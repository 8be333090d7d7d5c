import GateContract
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
    static let version = WebSocketOpening.version

    /// What a request head asks for.
    package enum Request: Sendable, Hashable {
        /// No `Upgrade: websocket` named by `Connection: upgrade`: plain HTTP.
        case none
        /// A valid opening handshake with this `Sec-WebSocket-Key`.
        case websocket(key: String)
        /// Asks for a WebSocket but breaks RFC 6455 §4.1 (refused, never forwarded).
        case invalid(ProxyError)
    }

    /// Reads the head of a request whose body framing is `framing`: the rules are
    /// `WebSocketOpening`'s (GateContract), which the check-only doors apply too.
    package static func request(_ head: HTTPRequestHead, framing: RequestBodyFraming) -> Request {
        let opening = WebSocketOpening(head.headers)
        guard opening.asksUpgrade else { return .none }
        switch opening.verdict(method: head.method, versionMinor: head.versionMinor, hasBody: framing != .none) {
        case .valid(let key):
            return .websocket(key: key)
        case .refused(.invalid(let message)):
            return .invalid(ProxyError(.websocketUpgradeInvalid, message))
        case .refused(.versionUnsupported(let message)):
            return .invalid(ProxyError(.websocketVersionUnsupported, message))
        }
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
                if WebSocketOpening.listContains(value, "websocket") { upgrade = true }
            } else if buffer.equalsLowercaseToken(field.name, "connection") {
                if WebSocketOpening.listContains(value, "upgrade") { connection = true }
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
}
